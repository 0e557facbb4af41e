"""The live plugin directory (issue 14): `drover plugins rescan` on a running broker
with native consumer processes (native_consumer.py) in groups.

- A new assignor file becomes selectable by name: consumers naming it are assigned by
  it (the `lopsided` fixture gives every partition to one member, a layout no built-in
  assignor makes). A newer build of it replacing the file is used by the next
  rebalance. A garbage file and a group-writable file dropped in at runtime are
  refused with their reasons, and the broker keeps serving.
- A group whose assignor is removed by a rescan keeps consuming under the default
  assignor, and the admin API says so.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

import conftest
from drover_testlib import assert_healthy, ck_create_topic, http_get, unique_topic
from test_native_group import PLUGIN_LIBS, Consumers, wait_for

CONFIG = """\
[plugins]
required = ["drover-coordinator", "range", "embedded"]

[coordinator]
default_assignor = "range"
"""
PARTITIONS = 6
LOPSIDED_V1 = "libdrover_fixture_lopsided_v1.so"
LOPSIDED_V2 = "libdrover_fixture_lopsided_v2.so"


def built(lib: str):
    path = conftest.drover_bin().parent / lib
    if not path.exists():
        pytest.fail(f"{path} is not built; `cargo build --workspace` builds it "
                    "(scripts/integration-tests.sh)", pytrace=False)
    return path


def drop_in(broker, lib: str, name: str, mode: int = 0o644) -> None:
    """Installs `lib` as `name` the way an operator would replace a file: a copy next to
    it, then an atomic rename over the old name."""
    tmp = broker.plugin_dir / f".{name}.tmp"
    shutil.copyfile(built(lib), tmp)
    os.chmod(tmp, mode)
    os.replace(tmp, broker.plugin_dir / name)


def rescan(broker) -> dict:
    """Runs `drover plugins rescan` against the broker; returns its JSON report."""
    out = subprocess.run(
        [str(conftest.drover_bin()), "plugins", "rescan", "--admin",
         f"{broker.host}:{broker.admin_port}", "--format", "json"],
        capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def group(broker, gid: str) -> dict | None:
    status, _, body = http_get(f"{broker.admin_url}/v1/groups/{gid}")
    return json.loads(body) if status == 200 else None


def owners(detail: dict | None) -> dict[str, int]:
    """Consumer id -> number of partitions it is assigned."""
    if not detail:
        return {}
    return {m["consumer_id"]: len(m["partitions"]) for m in detail["members"]}


def all_to(gid: str, broker, consumer: str, members: int):
    """A condition: every partition of the group is assigned to `consumer`."""
    def cond():
        d = group(broker, gid)
        o = owners(d)
        if len(o) != members or d["state"] != "stable":
            return f"{o} ({d and d['state']})"
        return True if o.get(consumer) == PARTITIONS else f"{o}"
    return cond


@pytest.fixture
def rescan_broker(broker_factory):
    b = broker_factory(CONFIG, start=False)
    conftest.install_plugins(b, PLUGIN_LIBS)
    return b


def test_a_new_assignor_is_selectable_after_a_rescan_and_a_replaced_one_is_used(
        rescan_broker, tmp_path):
    broker = conftest.start_or_fail(rescan_broker)
    topic = unique_topic("rescan")
    ck_create_topic(broker, topic, PARTITIONS)
    cs = Consumers(tmp_path, broker)
    try:
        # A group under the default assignor keeps running through everything below.
        cs.start("a1", "steady", topic)
        cs.start("a2", "steady", topic)
        wait_for("the steady group", lambda: sorted(owners(group(broker, "steady")).values())
                 == [3, 3], 60, cs)

        report = rescan(broker)
        assert report["added"] == [] and report["refused"] == [], report

        drop_in(broker, LOPSIDED_V1, "liblopsided.so")
        report = rescan(broker)
        assert [(c["name"], c["version"]) for c in report["added"]] == [("lopsided", "1.0.0")], report
        assert report["refused"] == [], report

        cs.start("b1", "tilted", topic, "--assignor", "lopsided")
        cs.start("b2", "tilted", topic, "--assignor", "lopsided")
        # Version 1 gives everything to the greatest member id.
        wait_for("lopsided 1.0.0 to assign", all_to("tilted", broker, "b2", 2), 60, cs)
        d = group(broker, "tilted")
        assert d["assignor"] == "lopsided" and d["effective_assignor"] == "lopsided", d
        assert "assignor_fallback" not in d, d

        # A newer build replaces the file; the next rebalance (a third member) uses it:
        # version 2 gives everything to the smallest member id.
        drop_in(broker, LOPSIDED_V2, "liblopsided.so")
        report = rescan(broker)
        assert [(c["name"], c["version"]) for c in report["replaced"]] == [("lopsided", "2.0.0")], report
        cs.start("b3", "tilted", topic, "--assignor", "lopsided")
        wait_for("lopsided 2.0.0 to assign", all_to("tilted", broker, "b1", 3), 60, cs)

        # A second file providing a name a running plugin has is refused, wherever it
        # sorts (startup would otherwise pick by file-name order).
        drop_in(broker, LOPSIDED_V1, "libaaa.so")
        report = rescan(broker)
        assert report["added"] == [] and report["replaced"] == [], report
        refused = {r["file"]: r["reason"] for r in report["refused"]}
        assert "duplicate plugin name `lopsided`" in refused.get("libaaa.so", ""), refused
        (broker.plugin_dir / "libaaa.so").unlink()

        # Garbage and a group-writable plugin, dropped in at runtime: refused with their
        # reasons; nothing changes and the broker keeps serving.
        (broker.plugin_dir / "libgarbage.so").write_bytes(b"not a library at all")
        os.chmod(broker.plugin_dir / "libgarbage.so", 0o644)
        drop_in(broker, "libdrover_assignor_round_robin.so", "libgroupwritable.so", 0o664)
        # A copy cut short: mapping it would kill the broker with SIGBUS.
        for cut in (1000, 100_000):
            (broker.plugin_dir / f"libcut{cut}.so").write_bytes(
                built("libdrover_assignor_round_robin.so").read_bytes()[:cut])
            os.chmod(broker.plugin_dir / f"libcut{cut}.so", 0o644)
        report = rescan(broker)
        refused = {r["file"]: r["reason"] for r in report["refused"]}
        assert "expected an ELF shared object" in refused.get("libgarbage.so", ""), refused
        assert "writable by group or others" in refused.get("libgroupwritable.so", ""), refused
        for cut in (1000, 100_000):
            assert "truncated or damaged ELF file" in refused.get(f"libcut{cut}.so", ""), refused
        assert report["added"] == [] and report["replaced"] == [] and report["removed"] == [], report
        status, _, body = http_get(f"{broker.admin_url}/v1/plugins")
        rows = {r["file"]: r for r in json.loads(body)}
        assert rows["libgarbage.so"]["status"].startswith("refused:"), rows
        assert rows["liblopsided.so"]["version"] == "2.0.0", rows
        broker.assert_alive()
        assert_healthy(broker)
        assert sorted(owners(group(broker, "steady")).values()) == [3, 3]
        assert owners(group(broker, "tilted")) == {"b1": PARTITIONS, "b2": 0, "b3": 0}
        cs.assert_running()
    except BaseException:
        print("\n" + cs.dump_logs())
        raise
    finally:
        cs.stop_all()


def test_a_group_whose_assignor_is_removed_falls_back_to_the_default(
        rescan_broker, tmp_path):
    drop_in(rescan_broker, LOPSIDED_V1, "liblopsided.so")
    broker = conftest.start_or_fail(rescan_broker)
    topic = unique_topic("fallback")
    ck_create_topic(broker, topic, PARTITIONS)
    cs = Consumers(tmp_path, broker)
    try:
        cs.start("c1", "orphan", topic, "--assignor", "lopsided")
        cs.start("c2", "orphan", topic, "--assignor", "lopsided")
        wait_for("lopsided to assign", all_to("orphan", broker, "c2", 2), 60, cs)

        (broker.plugin_dir / "liblopsided.so").unlink()
        report = rescan(broker)
        assert [c["name"] for c in report["removed"]] == ["lopsided"], report
        d = group(broker, "orphan")
        assert d["assignor"] == "lopsided", d
        assert d["effective_assignor"] == "range", d
        assert "not loaded" in d["assignor_fallback"], d

        # The next rebalance runs the default (range: 2 partitions each), and the
        # consumers keep consuming.
        cs.start("c3", "orphan", topic, "--assignor", "lopsided")
        wait_for("range to assign", lambda: sorted(owners(group(broker, "orphan")).values())
                 == [2, 2, 2], 60, cs)
        _, _, metrics = http_get(f"{broker.admin_url}/metrics")
        fallbacks = [ln for ln in metrics.splitlines()
                     if ln.startswith('drover_coordinator_events_total{name="assignor_fallbacks"}')]
        assert fallbacks and float(fallbacks[0].split()[-1]) >= 1, fallbacks
        cs.assert_running()
        assert "is not loaded; the group uses the default assignor" in broker.all_logs()
    except BaseException:
        print("\n" + cs.dump_logs())
        raise
    finally:
        cs.stop_all()


def test_rescans_stop_at_the_library_limit_and_keep_the_loaded_version(broker_factory):
    # Five libraries load at startup; one more fits.
    b = broker_factory(CONFIG.replace(
        'required = ["drover-coordinator", "range", "embedded"]',
        'required = ["drover-coordinator", "range", "embedded"]\nmax_loaded_libraries = 6'),
        start=False)
    conftest.install_plugins(b, PLUGIN_LIBS)
    broker = conftest.start_or_fail(b)

    drop_in(broker, LOPSIDED_V1, "liblopsided.so")
    report = rescan(broker)
    assert [c["name"] for c in report["added"]] == ["lopsided"], report
    assert report["libraries_loaded"] == 6 and report["max_loaded_libraries"] == 6, report

    # A seventh distinct library would stay mapped until a restart: refused, and the
    # version loaded before stays in use.
    drop_in(broker, LOPSIDED_V2, "liblopsided.so")
    report = rescan(broker)
    assert report["replaced"] == [], report
    reasons = [r["reason"] for r in report["refused"] if r["file"] == "liblopsided.so"]
    assert reasons and "max_loaded_libraries" in reasons[0], report
    _, _, body = http_get(f"{broker.admin_url}/v1/plugins")
    rows = {r["file"]: r for r in json.loads(body)}
    assert rows["liblopsided.so"]["version"] == "1.0.0", rows
    _, _, metrics = http_get(f"{broker.admin_url}/metrics")
    assert "drover_plugin_libraries_loaded 6" in metrics, metrics
    broker.assert_alive()


def test_an_assignor_that_does_not_start_is_refused_at_every_rescan(broker_factory):
    # Its config table makes `lopsided` refuse to start (it takes no config).
    b = broker_factory(CONFIG + "\n[plugins.config.lopsided]\nbogus = 1\n", start=False)
    conftest.install_plugins(b, PLUGIN_LIBS)
    broker = conftest.start_or_fail(b)
    drop_in(broker, LOPSIDED_V1, "liblopsided.so")
    for _ in range(2):
        report = rescan(broker)
        assert report["added"] == [], report
        reasons = [r["reason"] for r in report["refused"] if r["file"] == "liblopsided.so"]
        assert reasons and "did not start with its config" in reasons[0], report
        _, _, body = http_get(f"{broker.admin_url}/v1/plugins")
        rows = {r["file"]: r for r in json.loads(body)}
        assert rows["liblopsided.so"]["status"].startswith("refused:"), rows
    broker.assert_alive()


def test_a_refused_file_is_counted_once_per_version(rescan_broker):
    """drover_plugin_files_refused_total counts each refused file version once (issue 28
    item 7): rescans that find the same broken file refuse it again, listed every time,
    but the counter moves only when a new version of the file is refused. Before, every
    rescan counted it again."""
    from test_admin import parse_metrics

    def refused_total() -> float:
        samples = parse_metrics(http_get(broker.admin_url + "/metrics")[2])
        return [v for n, _l, v in samples if n == "drover_plugin_files_refused_total"][0]

    broker = conftest.start_or_fail(rescan_broker)
    before = refused_total()
    garbage = broker.plugin_dir / "libgarbage.so"
    garbage.write_bytes(b"not a library")
    os.chmod(garbage, 0o644)
    for _ in range(3):
        report = rescan(broker)
        assert [r["file"] for r in report["refused"]] == ["libgarbage.so"], report
    assert refused_total() == before + 1
    # Another version of the file: counted once more.
    garbage.write_bytes(b"still not a library, and longer")
    for _ in range(2):
        rescan(broker)
    assert refused_total() == before + 2
    broker.assert_alive()
