"""A slow assignor and one that never returns do not stop the other groups (issue 28
item 2; `coordinator.assignor_timeout_ms`, host/src/coordination/assignor_budget.rs).

One broker with two fixture assignors: `slow` (tests/fixtures/slow-assignor, sleeps
`sleep_ms` in every call) and `stuck` (tests/fixtures/stuck-assignor, never returns), and
a budget of 500 ms per assignor call. A KIP-848 group (confluent-kafka,
`group.protocol=consumer`) names `slow`; a native group (`drover consume --assignor`)
and a KIP-848 group name `stuck`. While their calls run past the budget:

- KIP-848 (`sticky`), classic (client-side `range`) and native (`round-robin`) groups
  on other assignors form, rebalance when a second member joins, and commit what they
  consume, each within a bounded wait;
- OffsetFetch requests sent to the coordinator every 200 ms throughout are all
  answered within a bound far below the slow assignor's sleep and the budget (assignor
  calls run off the coordinator thread: host/src/coordination/driver/assignor_runs.rs);
- the groups on `slow` and `stuck` get their partitions from the default assignor
  (`range`): the KIP-848 ones show `range` as their assignor in GET /v1/groups/{group},
  the native one `effective_assignor = range` with an `assignor_fallback` that says
  why; the plugins show as slow in GET /v1/plugins and `drover plugins list --admin`;
  the metrics count the timeouts, the calls still overdue, and the fallbacks and
  failures (KIP-848 failures included: issue 28 item 7);
- once the slow call returns, `slow` is no longer slow; `stuck` stays slow.

No timing is measured as a figure; every wait is bounded.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

from conftest import drover_bin, install_plugins, start_or_fail
from connector_testlib import Consumers as NativeConsumers
from connector_testlib import admin_group, committed_offsets, consumer_args
from drover_testlib import Msg, ck_admin, ck_create_topic, ck_produce, http_get, unique_topic
from kafka_groups_testlib import consumers  # noqa: F401  (pytest fixture)
from kafka_groups_testlib import wait_for

BUDGET_MS = 500
SLOW_SLEEP_MS = 8000
PARTITIONS = 4
# Far below the slow assignor's sleep (and a budget): assignor calls run off the
# coordinator thread (coordinator ABI 3.6), so no request waits behind one; before,
# every request waited behind a whole call (up to its budget).
PROBE_BOUND_S = 2.0
WAIT_S = 30

LIBS = [
    "libdrover_coordinator.so",
    "libdrover_assignor_range.so",
    "libdrover_assignor_round_robin.so",
    "libdrover_assignor_sticky.so",
    "libdrover_offsets_embedded.so",
    "libdrover_fixture_slow_assignor.so",
    "libdrover_fixture_stuck_assignor.so",
]

CONFIG = f"""\
[coordinator]
assignor_timeout_ms = {BUDGET_MS}

[plugins]
required = ["drover-coordinator", "range", "round-robin", "sticky", "embedded", "slow", "stuck"]

[plugins.config.slow]
sleep_ms = {SLOW_SLEEP_MS}

[plugins.config.drover-coordinator]
initial_rebalance_delay_ms = 300
min_session_timeout_ms = 1000
consumer_session_timeout_ms = 3000
consumer_heartbeat_interval_ms = 500
rebalance_delay_ms = 100
commit_interval_ms = 200
"""


@pytest.fixture
def native(tmp_path, request):
    cs = NativeConsumers(tmp_path)
    yield cs
    cs.stop_all()
    rep = getattr(request.node, "rep_call", None)
    if rep is not None and rep.failed:
        print("\n===== native consumers =====\n" + cs.dump())


class Probe(threading.Thread):
    """OffsetFetch of a group every 200 ms through the coordinator; keeps the slowest
    answer's duration and any error."""

    def __init__(self, broker, group: str, topic: str):
        super().__init__(daemon=True)
        self.admin = ck_admin(broker)
        self.req = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0)])
        self.stop_ev = threading.Event()
        self.slowest = 0.0
        self.count = 0
        self.errors: list[str] = []

    def run(self):
        while not self.stop_ev.is_set():
            t = time.monotonic()
            try:
                self.admin.list_consumer_group_offsets([self.req], request_timeout=30)[
                    self.req.group_id].result(timeout=30)
            except Exception as e:  # noqa: BLE001  (reported by the test)
                self.errors.append(repr(e))
            self.slowest = max(self.slowest, time.monotonic() - t)
            self.count += 1
            self.stop_ev.wait(0.2)

    def stop(self):
        self.stop_ev.set()
        self.join(40)

    def assert_served(self) -> str:
        """Every probe answered, none slower than PROBE_BOUND_S; a summary line."""
        assert self.count > 10, self.count
        assert not self.errors, self.errors[:5]
        assert self.slowest < PROBE_BOUND_S, (
            f"an OffsetFetch waited {self.slowest:.2f} s (bound {PROBE_BOUND_S} s)")
        return f"slowest of {self.count} OffsetFetch probes: {self.slowest * 1000:.0f} ms"


def plugin_rows(b) -> dict[str, dict]:
    status, _ctype, body = http_get(f"{b.admin_url}/v1/plugins")
    assert status == 200, (status, body)
    return {r["name"]: r for r in json.loads(body)}


def metric_lines(b, prefix: str) -> list[str]:
    status, _ctype, body = http_get(f"{b.admin_url}/metrics")
    assert status == 200
    text = body.decode() if isinstance(body, bytes) else body
    return [ln for ln in text.splitlines() if ln.startswith(prefix)]


def metric(b, name: str) -> float:
    lines = metric_lines(b, name + " ")
    return float(lines[0].split()[-1]) if lines else 0.0


def kafka_partitions(b, group: str) -> dict[str, set[int]]:
    """member id -> its partitions, from GET /v1/groups/{group}."""
    g = admin_group(b, group) or {}
    out = {}
    for m in g.get("members", []):
        out[m["consumer_id"]] = {int(tp.rsplit("-", 1)[1]) for tp in m["partitions"]}
    return out


def start_other_groups(b, consumers, native, topics):  # noqa: F811
    """A first member of a KIP-848 (`sticky`), a classic (client-side `range`) and a
    native (`round-robin`) group; returns them once each owns every partition."""
    k1 = consumers.start("confluent", b, topics["kip848"], "g-848", "k848-1",
                         protocol="consumer", assignor="sticky")
    c1 = consumers.start("confluent", b, topics["classic"], "g-classic", "classic-1",
                         protocol="classic", assignor="range", session_timeout_ms=3000)
    n1 = native.start("native-1", *consumer_args(b, "g-native", "--topic", topics["native"],
                                                 consumer_id="native-1",
                                                 extra=("--assignor", "round-robin")))
    wait_for(lambda: k1.current() == set(range(PARTITIONS))
             and c1.current() == set(range(PARTITIONS))
             and len(n1.owned()[1]) == PARTITIONS, WAIT_S,
             "the KIP-848, classic and native groups' first members to get every partition")
    return k1, c1, n1


def test_slow_and_stuck_assignors_do_not_hold_other_groups(broker_factory, consumers,  # noqa: F811
                                                           native):
    b = broker_factory(CONFIG, start=False)
    install_plugins(b, LIBS)
    start_or_fail(b)
    topics = {k: unique_topic(k) for k in
              ("slow", "stuck", "stuck848", "kip848", "classic", "native")}
    for t in topics.values():
        ck_create_topic(b, t, PARTITIONS)
    probe = Probe(b, "probe-group", topics["kip848"])
    probe.start()
    try:
        # The groups on the slow and the stuck assignor.
        consumers.start("confluent", b, topics["slow"], "g-slow", "slow-1",
                        protocol="consumer", assignor="slow")
        consumers.start("confluent", b, topics["stuck848"], "g-stuck-848", "stuck848-1",
                        protocol="consumer", assignor="stuck")
        native.start("stuck-1", *consumer_args(b, "g-stuck", "--topic", topics["stuck"],
                                               consumer_id="stuck-1",
                                               extra=("--assignor", "stuck")))
        wait_for(lambda: plugin_rows(b)["stuck"].get("slow") and
                 plugin_rows(b)["slow"].get("slow"), WAIT_S,
                 "both fixture assignors to be marked slow")
        slow_seen = time.monotonic()

        # Groups on other assignors, while the calls run past their budgets.
        k1, c1, n1 = start_other_groups(b, consumers, native, topics)
        # A second member each: every group rebalances.
        k2 = consumers.start("confluent", b, topics["kip848"], "g-848", "k848-2",
                             protocol="consumer", assignor="sticky")
        c2 = consumers.start("confluent", b, topics["classic"], "g-classic", "classic-2",
                             protocol="classic", assignor="range", session_timeout_ms=3000)
        n2 = native.start("native-2", *consumer_args(b, "g-native", "--topic", topics["native"],
                                                     consumer_id="native-2",
                                                     extra=("--assignor", "round-robin")))

        def split(a, c):
            return bool(a) and bool(c) and not (a & c) and (a | c) == set(range(PARTITIONS))

        def held(n):
            return {p for _, p in n.owned()[1]}

        wait_for(lambda: split(k1.current(), k2.current())
                 and split(c1.current(), c2.current())
                 and split(held(n1), held(n2)),
                 WAIT_S, "every group to rebalance over its two members")
        # They consume and commit.
        for key in ("kip848", "classic", "native"):
            ck_produce(b, topics[key], [Msg(b"k", f"{key}-{p}".encode(), [], partition=p)
                                        for p in range(PARTITIONS)])
        for group, key in (("g-848", "kip848"), ("g-classic", "classic"),
                           ("g-native", "native")):
            wait_for(lambda g=group, t=topics[key]: all(
                (committed_offsets(b, g).get((t, p)) or 0) >= 1 for p in range(PARTITIONS)),
                WAIT_S, f"{group} to commit every partition")
        native.assert_running()
        others_served = time.monotonic() - slow_seen

        # The stuck plugin is still slow; its groups run on the default assignor.
        assert plugin_rows(b)["stuck"]["slow"], plugin_rows(b)["stuck"]
        wait_for(lambda: len(native.procs["stuck-1"].owned()[1]) == PARTITIONS, WAIT_S,
                 "the native group on `stuck` to get its partitions from the default")
        g = admin_group(b, "g-stuck")
        assert g["assignor"] == "stuck", g
        assert g["effective_assignor"] == "range", g
        assert "slow" in g["assignor_fallback"], g
        for group in ("g-slow", "g-stuck-848"):
            wait_for(lambda gr=group: (admin_group(b, gr) or {}).get("assignor") == "range"
                     and set().union(*kafka_partitions(b, gr).values() or [set()])
                     == set(range(PARTITIONS)), WAIT_S,
                     f"KIP-848 group {group} to be assigned by the default assignor")

        # `drover plugins list --admin` shows it too.
        out = subprocess.run([str(drover_bin()), "plugins", "list", "--admin",
                              f"{b.host}:{b.admin_port}"],
                             capture_output=True, text=True, timeout=30)
        assert out.returncode == 0, out.stderr
        stuck_line = [ln for ln in out.stdout.splitlines() if " stuck " in ln]
        assert stuck_line and "slow:" in stuck_line[0], out.stdout

        # Metrics: timeouts, calls overdue, fallbacks and failures (KIP-848's too).
        assert metric(b, 'drover_assignor_timeouts_total{assignor="stuck"}') >= 1
        # One per group that called it before it was marked slow (the two groups on
        # `stuck` call it at once, on two of its threads), never more than its threads.
        assert 1 <= metric(b, 'drover_assignor_calls_overdue{assignor="stuck"}') <= 4
        assert metric(b, 'drover_assignor_timeouts_total{assignor="slow"}') >= 1
        assert metric(b, 'drover_coordinator_events_total{name="assignor_fallbacks"}') >= 3
        assert metric(b, 'drover_coordinator_events_total{name="assignor_failures"}') >= 3

        # The slow call returns: `slow` is no longer slow; `stuck` still is.
        wait_for(lambda: plugin_rows(b)["slow"].get("slow") is None,
                 SLOW_SLEEP_MS / 1000 + WAIT_S, "the slow assignor's call to return")
        assert "is no longer slow" in b.stderr_text()
        assert metric(b, 'drover_assignor_calls_overdue{assignor="slow"}') == 0
        assert plugin_rows(b)["stuck"]["slow"]
    finally:
        probe.stop()
    summary = probe.assert_served()
    print(f"other groups served {others_served:.1f} s after the assignors were slow; {summary}")


WITHIN_BUDGET_SLEEP_MS = 6000
WITHIN_CONFIG = CONFIG.replace(f"assignor_timeout_ms = {BUDGET_MS}", "assignor_timeout_ms = 20000") \
    .replace(f"sleep_ms = {SLOW_SLEEP_MS}", f"sleep_ms = {WITHIN_BUDGET_SLEEP_MS}")


def test_a_slow_assignor_within_its_budget_holds_only_its_own_group(broker_factory,  # noqa: F811
                                                                   consumers, native):
    """An assignor that takes 6 s (within a 20 s budget) holds its own group for 6 s and
    nothing else: groups on other assignors (KIP-848, classic, native) form while its
    call runs, every OffsetFetch is answered meanwhile, and the group then gets the
    slow assignor's own assignment (no fallback)."""
    b = broker_factory(WITHIN_CONFIG, start=False)
    install_plugins(b, LIBS)
    start_or_fail(b)
    topics = {k: unique_topic(k) for k in ("slow", "kip848", "classic", "native")}
    for t in topics.values():
        ck_create_topic(b, t, PARTITIONS)
    probe = Probe(b, "probe-group", topics["kip848"])
    probe.start()
    try:
        s1 = consumers.start("confluent", b, topics["slow"], "g-slow", "slow-1",
                             protocol="consumer", assignor="slow")
        wait_for(lambda: (admin_group(b, "g-slow") or {}).get("members"), WAIT_S,
                 "the group on the slow assignor to have its member")
        started = time.monotonic()
        k1, c1, n1 = start_other_groups(b, consumers, native, topics)
        others = time.monotonic() - started
        # The slow call is still running: its group has nothing yet.
        assert not s1.current(), (others, s1.current())
        wait_for(lambda: s1.current() == set(range(PARTITIONS)), WAIT_S,
                 "the group on the slow assignor to get every partition")
        g = admin_group(b, "g-slow")
        assert g["assignor"] == "slow", g
        assert metric(b, 'drover_assignor_timeouts_total{assignor="slow"}') == 0
        assert metric(b, 'drover_coordinator_events_total{name="assignor_fallbacks"}') == 0
    finally:
        probe.stop()
    summary = probe.assert_served()
    print(f"other groups formed in {others:.1f} s while the slow assignor ran; {summary}")
