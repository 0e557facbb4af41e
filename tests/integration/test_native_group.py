"""The native group protocol through the loaded coordinator `.so` inside the real broker,
with consumers speaking it over TCP (issue 4).

The consumers are `native_consumer.py` processes: an independent Python implementation
of docs/protocol.md (codec in `native_protocol.py`), fetching data with confluent-kafka
under manual assignment. Each appends "topic partition offset" per delivered record to
its out file, and one JSON object per state change (registered, start, stop, lost, and
every answer it sends on the channel) to its events file. Timestamps in the events are
CLOCK_MONOTONIC, comparable across processes on this machine.

On failure, every consumer's stderr log and the broker's log are printed.
"""

from __future__ import annotations

import collections
import json
import signal
import struct
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

import native_protocol as np
import conftest
from conftest import _die_with_parent
from drover_testlib import Msg, ck_create_topic, ck_produce, http_get, unique_topic

HERE = Path(__file__).resolve().parent
CONSUMER_SCRIPT = HERE / "native_consumer.py"

# The coordinator's minimum session timeout (Kafka's group.min.session.timeout.ms).
SESSION_TIMEOUT_MS = 6000
HEARTBEAT_INTERVAL_S = SESSION_TIMEOUT_MS / 3 / 1000
PARTITIONS = 6

# Plugins the broker needs for native groups, as built by `cargo build --workspace`
# next to the drover binary.
PLUGIN_LIBS = [
    "libdrover_coordinator.so",
    "libdrover_assignor_range.so",
    "libdrover_assignor_round_robin.so",
    "libdrover_assignor_sticky.so",
    "libdrover_offsets_embedded.so",
]
CONFIG = """\
[plugins]
required = ["drover-coordinator", "range", "round-robin", "embedded"]
"""
MODES = ["incremental", "eager"]


def config_for(mode: str | None) -> str:
    if mode is None:
        return CONFIG
    return CONFIG + f'\n[plugins.config.drover-coordinator]\nrebalance_mode = "{mode}"\n'


# ---------------------------------------------------------------------------------
# Fixtures
# ---------------------------------------------------------------------------------
def install_plugins(broker) -> None:
    conftest.install_plugins(broker, PLUGIN_LIBS)


@pytest.fixture
def native_broker(broker_factory, request):
    """A broker with the coordinator, the assignors and the embedded offset store; the
    coordinator's rebalance mode is the test's `mode` parameter, if it has one."""
    mode = getattr(request, "param", None)
    if mode is None and hasattr(request.node, "callspec"):
        mode = request.node.callspec.params.get("mode")
    b = broker_factory(config_for(mode), start=False)
    install_plugins(b)
    return conftest.start_or_fail(b)


@dataclass
class ConsumerProc:
    cid: str
    proc: subprocess.Popen
    out: Path
    events: Path
    stderr: Path
    killed: bool = False

    def lines(self) -> list[tuple[str, int, int]]:
        if not self.out.exists():
            return []
        out = []
        for line in self.out.read_text().splitlines():
            t, p, o = line.split(" ")
            out.append((t, int(p), int(o)))
        return out

    def event_list(self) -> list[dict]:
        if not self.events.exists():
            return []
        evs = []
        for line in self.events.read_text().splitlines():
            try:
                evs.append(json.loads(line))
            except json.JSONDecodeError:  # a kill -9 may cut the last line
                pass
        return evs

    def owned(self) -> tuple[int | None, set[tuple[str, int]]]:
        """(generation, partitions) as the consumer's events say now."""
        gen, owned = None, set()
        for e in self.event_list():
            k = e["event"]
            if k == "registered":
                gen, owned = e["generation"], set()
            elif k == "start":
                gen = e["generation"]
                owned = {(t, p) for t, p, _s, _pos in e["assignment"]}
            elif k == "stop":
                owned -= {tuple(x) for x in e["stopped"]}
            elif k in ("stop_all", "lost"):
                owned = set()
        return gen, owned


class Consumers:
    """Starts native_consumer.py processes; prints their logs when the test fails."""

    def __init__(self, tmp_path: Path, broker):
        self.dir = tmp_path / "consumers"
        self.dir.mkdir(exist_ok=True)
        self.broker = broker
        self.procs: dict[str, ConsumerProc] = {}

    def start(self, cid: str, group: str, topic: str, *extra: str) -> ConsumerProc:
        out, ev, err = (self.dir / f"{cid}.out", self.dir / f"{cid}.events",
                        self.dir / f"{cid}.stderr")
        cmd = [sys.executable, str(CONSUMER_SCRIPT), "--bootstrap", self.broker.bootstrap,
               "--group", group, "--consumer-id", cid, "--topic", topic, "--streams", "2",
               "--session-timeout-ms", str(SESSION_TIMEOUT_MS), "--host", "127.0.0.1",
               "--out", str(out), "--events", str(ev), "--max-runtime-s", "280", *extra]
        with open(err, "wb") as errf:
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=errf, stderr=errf,
                                    cwd=self.dir, preexec_fn=_die_with_parent)
        c = ConsumerProc(cid, proc, out, ev, err)
        self.procs[cid] = c
        return c

    def assert_running(self, *cids: str) -> None:
        for cid in cids or list(self.procs):
            c = self.procs[cid]
            if not c.killed and c.proc.poll() is not None:
                raise AssertionError(f"consumer {cid} exited with status {c.proc.returncode}")

    def kill9(self, cid: str) -> None:
        c = self.procs[cid]
        c.proc.send_signal(signal.SIGKILL)
        c.proc.wait(timeout=10)
        c.killed = True

    def stop_all(self) -> dict[str, int | None]:
        """SIGTERM (graceful leave) every live consumer; SIGKILL stragglers."""
        for c in self.procs.values():
            if c.proc.poll() is None:
                c.proc.send_signal(signal.SIGTERM)
        rcs = {}
        deadline = time.monotonic() + 20
        for cid, c in self.procs.items():
            try:
                rcs[cid] = c.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                c.proc.kill()
                c.proc.wait(timeout=10)
                rcs[cid] = None
        return rcs

    def dump_logs(self) -> str:
        parts = []
        for cid, c in self.procs.items():
            text = c.stderr.read_text(errors="replace") if c.stderr.exists() else ""
            lines = [ln for ln in text.splitlines() if not ln.startswith("%")]  # librdkafka noise
            parts.append(f"===== consumer {cid} stderr (last 120 lines; exit {c.proc.poll()}"
                         f"{', killed' if c.killed else ''}) =====\n" + "\n".join(lines[-120:]))
        return "\n".join(parts)


@pytest.fixture
def consumers(tmp_path, native_broker, request):
    cs = Consumers(tmp_path, native_broker)
    yield cs
    cs.stop_all()
    rep = getattr(request.node, "rep_call", None)
    if rep is not None and rep.failed:
        print("\n" + cs.dump_logs())


# ---------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------
def wait_for(what: str, cond, timeout: float, consumers: Consumers | None = None,
             interval: float = 0.2):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        if consumers is not None:
            consumers.assert_running()
        last = cond()
        if last is True or (last and not isinstance(last, (str, bool))):
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}"
                         + (f": {last}" if isinstance(last, str) else ""))


def produce(broker, topic: str, n: int, tag: str) -> list[tuple[int, int]]:
    msgs = [Msg(b"key-%d" % (i % 97), b"%s-%06d" % (tag.encode(), i)) for i in range(n)]
    return ck_produce(broker, topic, msgs)


class BackgroundProducer:
    """Produces small batches until stopped; `acks` collects (partition, offset)."""

    def __init__(self, broker, topic: str, tag: str, batch: int = 40, pause: float = 0.1):
        self.broker, self.topic, self.tag = broker, topic, tag
        self.batch, self.pause = batch, pause
        self.acks: set[tuple[int, int]] = set()
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        i = 0
        try:
            while not self._stop.is_set():
                self.acks |= set(produce(self.broker, self.topic, self.batch, f"{self.tag}{i}"))
                i += 1
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
        return self.acks

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(timeout=90)


def coverage(cs: list[ConsumerProc], produced: set[tuple[int, int]], topic: str):
    have = {(p, o) for c in cs for t, p, o in c.lines() if t == topic}
    return produced - have


def committed(broker, group: str, topic: str) -> dict[int, int]:
    r = np.fetch_offsets(broker.host, broker.port, group, [(topic, list(range(PARTITIONS)))])
    assert r.error_code == np.NONE, f"FetchOffsets: {np.error_name(r.error_code)}"
    out = {}
    for (t, p), (off, err) in r.offsets().items():
        assert err == np.NONE, f"FetchOffsets {t}-{p}: {np.error_name(err)}"
        out[p] = off
    assert set(out) == set(range(PARTITIONS)), f"FetchOffsets answered {sorted(out)}"
    return out


def admin_group(broker, group: str):
    status, _ctype, body = http_get(f"{broker.admin_url}/v1/groups/{group}")
    if status != 200:
        return status, body
    return status, json.loads(body)


def balanced(procs: list[ConsumerProc], topic: str, per_consumer: int):
    """True when the consumers agree on one generation and split every partition
    `per_consumer` each; else a description of their views."""
    views = {c.cid: c.owned() for c in procs}
    gens = {g for g, _ in views.values()}
    sizes = {cid: len(o) for cid, (_, o) in views.items()}
    union = set().union(*(o for _, o in views.values()))
    if len(gens) != 1 or None in gens or set(sizes.values()) != {per_consumer} \
            or union != {(topic, p) for p in range(PARTITIONS)}:
        return f"views {views}"
    return True


# ---------------------------------------------------------------------------------
# Issue 4: a group of 3 forms; one is killed with kill -9; the other two take over
# ---------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", MODES)
def test_kill9_takeover_from_committed_offsets(native_broker, consumers, mode):
    b = native_broker
    topic = unique_topic("native")
    group = unique_topic("group")
    ck_create_topic(b, topic, PARTITIONS)
    produced: set[tuple[int, int]] = set(produce(b, topic, 3000, "a"))
    assert len({p for p, _ in produced}) == PARTITIONS, "keys did not spread over all partitions"

    # --- the group forms one consumer at a time while data keeps coming, so partitions
    # move between live consumers (StopFetcher with final offsets, then StartFetcher).
    cids = ["c0", "c1", "c2"]
    procs: list[ConsumerProc] = []
    with BackgroundProducer(b, topic, "live") as bg:
        for n, cid in enumerate(cids, start=1):
            procs.append(consumers.start(cid, group, topic))
            wait_for(f"{n} consumer(s) to split the partitions",
                     lambda: balanced(procs, topic, PARTITIONS // n), 60, consumers)
            time.sleep(0.5)  # let them deliver some live records before the next join
        produced |= bg.stop()

    def formed():
        ok = balanced(procs, topic, 2)
        if ok is not True:
            return ok
        missing = coverage(procs, produced, topic)
        return True if not missing else f"{len(missing)} records not consumed yet"
    wait_for("the group of 3 to consume everything", formed, 60, consumers)
    gen1 = procs[0].owned()[0]
    assert gen1 >= 3, f"three joins should make at least three generations, got {gen1}"
    modes_seen = {e["stop_all"] for c in procs for e in c.event_list() if e["event"] == "stop"}
    assert modes_seen == {mode == "eager"}, \
        f"{mode} mode: StopFetcher stop_all values seen {modes_seen}"

    # The coordinator's own view (DescribeGroups, 5.8) matches the consumers'.
    d = np.describe_groups(b.host, b.port, [group])
    assert len(d.groups) == 1, d
    g = d.groups[0]
    assert (g.group_id, g.error_code, g.state, g.generation, g.assignor, g.rebalance_mode) \
        == (group, np.NONE, "stable", gen1, "range", mode), g
    assert [m.consumer_id for m in g.members] == cids, g
    for m, c in zip(g.members, procs):
        assert (m.host, m.session_timeout_ms, m.generation, m.topics, m.auto_offset_reset,
                m.subscription) == ("127.0.0.1", SESSION_TIMEOUT_MS, gen1, [topic],
                                    np.RESET_EARLIEST, f"static: {topic}(2)"), m
        assert np.topic_ints_to_set(m.partitions) == c.owned()[1], (m, c.owned())
    assert g.held_by_failed == [], g

    status, view = admin_group(b, group)
    if status == 200:
        members = {m["consumer_id"]: m for m in view["members"]}
        assert set(members) == set(cids), view
        assert all(len(m["partitions"]) == 2 for m in members.values()), view
        assert view["generation"] == gen1, view
    else:
        print(f"admin GET /v1/groups/{group}: {status} {view!r} (not checked)")

    # --- heartbeats commit the consumed offsets (automatic commit, 5.2 / 6.5).
    ends = collections.Counter(p for p, _ in produced)

    def caught_up():
        c = committed(b, group, topic)
        return True if c == dict(ends) else f"committed {c}, log ends {dict(ends)}"
    wait_for("heartbeats to commit the consumed offsets", caught_up,
             6 * HEARTBEAT_INTERVAL_S + 10, consumers)

    # --- more data while all three consume, then kill -9 one in the middle of it.
    victim = consumers.procs["c1"]
    survivors = [consumers.procs["c0"], consumers.procs["c2"]]
    victim_parts = victim.owned()[1]
    before = len(victim.lines())
    produced |= set(produce(b, topic, 1500, "b"))
    wait_for("the victim to consume some of the second batch",
             lambda: len(victim.lines()) > before + 50, 30, consumers)
    consumers.kill9("c1")
    t_kill = time.monotonic()

    # Committed offsets after the kill, before any takeover (which waits for the lease).
    committed_at_kill = committed(b, group, topic)
    t_fetched = time.monotonic()
    assert t_fetched - t_kill < SESSION_TIMEOUT_MS / 1000, \
        "FetchOffsets after the kill took longer than a session timeout"

    # The victim's last frame on its channel. The coordinator heard from it no earlier
    # than this, so it may not release its partitions before this + session timeout
    # (6.2 rule d). "sending" is logged just before the write; a kill landing between
    # the two (microseconds) would make the checks below stricter than the protocol.
    sent = [e["mono"] for e in victim.event_list() if e["event"] == "sending"]
    assert sent, "the victim never sent anything on its channel"
    victim_last_sent = max(sent)
    release_not_before = victim_last_sent + SESSION_TIMEOUT_MS / 1000

    # The coordinator sees the closed channel at once: the victim is failed, and its
    # partitions are held (owned by nobody) until released.
    def victim_gone():
        d = np.describe_groups(b.host, b.port, [group]).groups[0]
        return d if "c1" not in [m.consumer_id for m in d.members] else "c1 still a member"
    g = wait_for("the coordinator to fail the killed consumer", victim_gone, 10, interval=0.05)
    t_desc = time.monotonic()
    if t_desc < release_not_before - 0.5:
        assert np.topic_ints_to_set(g.held_by_failed) == victim_parts, \
            f"{t_desc - t_kill:.2f} s after the kill: held_by_failed {g.held_by_failed}, " \
            f"victim owned {sorted(victim_parts)}"
        for m in g.members:
            assert not np.topic_ints_to_set(m.partitions) & victim_parts, \
                f"{m.consumer_id} owns a partition of the victim before its release: {m}"
    else:
        print(f"DescribeGroups came {t_desc - victim_last_sent:.2f} s after the victim's last "
              "frame: held_by_failed not checked")

    produced |= set(produce(b, topic, 1500, "c"))

    # --- the two survivors take over the victim's partitions.
    def taken_over():
        views = {c.cid: c.owned() for c in survivors}
        gens = {g for g, _ in views.values()}
        union = set().union(*(o for _, o in views.values()))
        if len(gens) != 1 or gens == {gen1} or union != {(topic, p) for p in range(PARTITIONS)}:
            return f"views {views}"
        missing = coverage(survivors + [victim], produced, topic)
        if missing:
            return f"{len(missing)} records not consumed yet, e.g. {sorted(missing)[:5]}"
        return True
    wait_for("the survivors to take over and consume everything", taken_over,
             SESSION_TIMEOUT_MS / 1000 + 60, consumers)
    consumers.assert_running("c0", "c2")

    final = {c.cid: c.owned() for c in survivors}
    assert all(len(o) == PARTITIONS // 2 for _, o in final.values()), \
        f"survivors should own 3 partitions each: {final}"

    if mode == "eager":
        for s in survivors:
            assert any(e["event"] == "stop" and e["stop_all"] and e["mono"] > t_kill
                       for e in s.event_list()), f"eager: {s.cid} got no StopFetcher after the kill"

    # --- each victim partition was started, by a survivor, at the committed offset.
    takeover: dict[int, tuple[str, int, float]] = {}  # partition -> (consumer, start, mono)
    for s in survivors:
        for e in s.event_list():
            if e["event"] != "start" or e["mono"] < t_kill:
                continue
            for t, p, start, _pos in e["assignment"]:
                if (t, p) in victim_parts and p not in takeover:
                    takeover[p] = (s.cid, start, e["mono"])
    assert {(topic, p) for p in takeover} == victim_parts, \
        f"takeover StartFetchers {takeover}, victim owned {sorted(victim_parts)}"
    victim_max: dict[int, int] = {}
    for t, p, o in victim.lines():
        victim_max[p] = max(victim_max.get(p, -1), o)
    for p, (cid, start, mono) in sorted(takeover.items()):
        c = committed_at_kill[p]
        print(f"partition {p}: committed {c} at the kill, victim delivered up to "
              f"{victim_max.get(p)}, taken over by {cid} at start_offset {start}, "
              f"{mono - t_kill:.2f} s after the kill")
        assert mono > t_fetched, \
            f"partition {p}: taken over before the committed offsets were read"
        # The takeover starts from the committed offset the coordinator holds when it
        # releases the partition: what FetchOffsets read right after the kill, or more
        # when a commit the victim sent before it died (a heartbeat's, on its channel)
        # reached the coordinator after that read (seen on a loaded machine); never
        # beyond what the victim delivered.
        if start == np.START_RESET:
            assert c < 0, f"partition {p}: takeover from the reset policy, committed {c}"
        else:
            assert max(c, 0) <= start <= victim_max.get(p, -1) + 1, \
                f"partition {p}: takeover start_offset {start}, committed at the kill {c}, " \
                f"victim delivered up to {victim_max.get(p)}"
        assert c <= victim_max.get(p, -1) + 1, \
            f"partition {p}: committed {c} beyond what the victim delivered ({victim_max.get(p)})"
        # Rule 6.2 (d): released only once a session timeout has passed since the
        # coordinator last heard from the victim (no earlier than the victim's last send).
        assert mono >= release_not_before, (
            f"partition {p}: handed to {cid} {mono - victim_last_sent:.3f} s after the "
            f"victim's last frame, less than the session timeout")

    # --- every record consumed; duplicates only on the victim's partitions, from the
    # committed offset up to what the victim had delivered.
    per_consumer = {c.cid: collections.Counter((p, o) for t, p, o in c.lines()) for c in procs}
    for cid, cnt in per_consumer.items():
        dups = [k for k, n in cnt.items() if n > 1]
        assert not dups, f"{cid} delivered {len(dups)} records twice, e.g. {sorted(dups)[:5]}"
    total = collections.Counter()
    for cnt in per_consumer.values():
        total.update(cnt)
    missing = produced - set(total)
    assert not missing, f"{len(missing)} records never consumed, e.g. {sorted(missing)[:10]}"
    unexpected = set(total) - produced
    assert not unexpected, f"consumed records never produced: {sorted(unexpected)[:10]}"
    bad_dups = []
    n_dups = 0
    for (p, o), n in total.items():
        if n == 1:
            continue
        n_dups += 1
        c = committed_at_kill[p]
        ok = ((topic, p) in victim_parts and n == 2 and per_consumer["c1"][(p, o)] == 1
              and o >= max(c, 0) and o <= victim_max[p])
        if not ok:
            bad_dups.append((p, o, n))
    assert not bad_dups, f"records delivered more than once outside the victim's " \
                         f"uncommitted range: {sorted(bad_dups)[:10]}"
    print(f"{len(total)} records consumed, {n_dups} redelivered after the kill")

    # --- the survivors leave gracefully.
    rcs = consumers.stop_all()
    assert rcs["c0"] == 0 and rcs["c2"] == 0, f"survivors' exit statuses {rcs}"


# ---------------------------------------------------------------------------------
# RegisterConsumer refusals (7.2), on a raw connection
# ---------------------------------------------------------------------------------
def reg(**kw) -> np.RegisterConsumerRequest:
    base = dict(group_id="g-refusals", consumer_id="c", host="127.0.0.1",
                session_timeout_ms=SESSION_TIMEOUT_MS, kind=np.KIND_STATIC,
                topics=[("some-topic", 1)], pattern=None, pattern_streams=0,
                auto_offset_reset=np.RESET_EARLIEST, assignor=None)
    base.update(kw)
    return np.RegisterConsumerRequest(**base)


WL = dict(kind=np.KIND_WHITELIST, topics=[], pattern_streams=1)

REFUSALS = [
    ("session-timeout-below-min", reg(session_timeout_ms=5999), np.INVALID_SESSION_TIMEOUT),
    ("session-timeout-above-max", reg(session_timeout_ms=1_800_001), np.INVALID_SESSION_TIMEOUT),
    ("session-timeout-negative", reg(session_timeout_ms=-1), np.INVALID_SESSION_TIMEOUT),
    ("bad-regex", reg(pattern="orders-(", **WL), np.INVALID_REGULAR_EXPRESSION),
    ("lookahead-regex", reg(pattern="(?=x)orders", **WL), np.INVALID_REGULAR_EXPRESSION),
    ("bad-regex-blacklist", reg(kind=np.KIND_BLACKLIST, topics=[], pattern="[", pattern_streams=1),
     np.INVALID_REGULAR_EXPRESSION),
    ("empty-group", reg(group_id=""), np.INVALID_GROUP_ID),
    ("empty-consumer-id", reg(consumer_id=""), np.INVALID_REQUEST),
    ("bad-kind", reg(kind=3), np.INVALID_REQUEST),
    ("static-no-topics", reg(topics=[]), np.INVALID_REQUEST),
    ("static-empty-topic-name", reg(topics=[("", 1)]), np.INVALID_REQUEST),
    ("static-repeated-topic", reg(topics=[("a", 1), ("a", 2)]), np.INVALID_REQUEST),
    ("static-zero-streams", reg(topics=[("a", 0)]), np.INVALID_REQUEST),
    ("static-with-pattern", reg(pattern="a.*"), np.INVALID_REQUEST),
    ("static-pattern-streams", reg(pattern_streams=1), np.INVALID_REQUEST),
    ("wildcard-with-topics", reg(pattern="a.*", kind=np.KIND_WHITELIST, topics=[("a", 1)],
                                 pattern_streams=1), np.INVALID_REQUEST),
    ("wildcard-null-pattern", reg(pattern=None, **WL), np.INVALID_REQUEST),
    ("wildcard-empty-pattern", reg(pattern="", **WL), np.INVALID_REQUEST),
    ("wildcard-zero-streams", reg(pattern="a.*", kind=np.KIND_WHITELIST, topics=[],
                                  pattern_streams=0), np.INVALID_REQUEST),
    ("bad-auto-offset-reset", reg(auto_offset_reset=3), np.INVALID_REQUEST),
    ("empty-assignor", reg(assignor=""), np.INVALID_REQUEST),
    # RegisterConsumer v1: member data out of range (5.1, 7.2).
    ("v1-weight-zero", reg(weight=0), np.INVALID_REQUEST),
    ("v1-weight-negative", reg(weight=-2), np.INVALID_REQUEST),
    ("v1-empty-rack", reg(rack=""), np.INVALID_REQUEST),
    ("v1-long-rack", reg(rack="r" * (np.MAX_MEMBER_STRING + 1)), np.INVALID_REQUEST),
    ("v1-empty-label-key", reg(labels=[("", "v")]), np.INVALID_REQUEST),
    ("v1-repeated-label", reg(labels=[("k", "1"), ("k", "2")]), np.INVALID_REQUEST),
    ("v1-long-label-value", reg(labels=[("k", "v" * (np.MAX_MEMBER_STRING + 1))]),
     np.INVALID_REQUEST),
    # The checks run in order; the first failing one decides (7.2).
    ("order-group-before-request", reg(group_id="", consumer_id=""), np.INVALID_GROUP_ID),
    ("order-request-before-timeout", reg(consumer_id="", session_timeout_ms=1),
     np.INVALID_REQUEST),
    ("order-timeout-before-regex", reg(session_timeout_ms=1, pattern="(", **WL),
     np.INVALID_SESSION_TIMEOUT),
    ("order-regex-before-assignor", reg(pattern="(", assignor="no-such-assignor", **WL),
     np.INVALID_REGULAR_EXPRESSION),
]


def test_register_refused(native_broker):
    """Every case of REFUSALS on one broker; reports all mismatches at once."""
    failures = []
    for case, request_, code in REFUSALS:
        with np.Conn(native_broker.host, native_broker.port, client_id="drover-it-native") as c:
            r = c.request(request_, timeout=15)
            if r.error_code != code:
                failures.append(f"{case}: got {np.error_name(r.error_code)} ({r.error_code}), "
                                f"want {np.error_name(code)} ({code}); message {r.error_message!r}")
                continue
            if r.heartbeat_interval_ms != 0 or r.generation != 0 or not r.error_message:
                failures.append(f"{case}: error response fields {r}")
                continue
            # The connection stays an ordinary one (section 4): it still answers.
            fo = c.request(np.FetchOffsetsRequest("g-refusals", None), timeout=15)
            if fo.error_code != np.NONE:
                failures.append(f"{case}: FetchOffsets after the refusal: {fo}")
    assert not failures, f"{len(failures)} of {len(REFUSALS)} cases wrong:\n" + "\n".join(failures)
    native_broker.assert_alive()


def test_register_v1_over_the_label_cap_is_malformed(native_broker):
    """A RegisterConsumer v1 whose labels count is over 32 is malformed (section 8): K
    closes the connection without answering. A well-formed v1 on a new connection is
    answered (NONE, the v0 response layout)."""
    b = native_broker
    topic = unique_topic("native-v1cap")
    ck_create_topic(b, topic, 1)
    request_ = reg(group_id=unique_topic("g-v1cap"), topics=[(topic, 1)], weight=2)
    frame = np.encode_request(1, "drover-it-native", request_)
    assert frame[6:8] == b"\x00\x01", "member data goes as version 1"
    body = frame[4:-4] + struct.pack(">i", np.MAX_LABELS_PER_CONSUMER + 1) + b"\x00" * 4 * 33
    with np.Conn(b.host, b.port, client_id="drover-it-native") as c:
        c.send(struct.pack(">i", len(body)) + body)
        with pytest.raises(np.ProtocolError):
            c.recv_frame(15)
    with np.Conn(b.host, b.port, client_id="drover-it-native") as c:
        r = c.request(request_, timeout=15)
        assert r.error_code == np.NONE, r
    b.assert_alive()


def test_member_data_registers_with_v1_and_consumes(native_broker, consumers):
    """native_consumer.py with --rack/--weight/--label registers with RegisterConsumer
    v1, beside a consumer without member data (v0) in the same group; the group
    rebalances over both and every record is consumed exactly once."""
    b = native_broker
    topic = unique_topic("native-v1")
    group = unique_topic("g-v1")
    ck_create_topic(b, topic, PARTITIONS)
    produced = set(produce(b, topic, 300, "v1"))
    c1 = consumers.start("c1", group, topic, "--rack", "rack-a", "--weight", "2",
                         "--label", "tier=gold")
    c2 = consumers.start("c2", group, topic)

    def versions():
        found = {c.cid: [e.get("version") for e in c.event_list() if e["event"] == "registered"]
                 for c in (c1, c2)}
        return found if all(found.values()) else f"registrations so far {found}"
    found = wait_for("both consumers to register", versions, 30, consumers)
    assert found == {"c1": [1], "c2": [0]}, found

    def all_consumed():
        have = [(p, o) for c in (c1, c2) for _t, p, o in c.lines()]
        missing = produced - set(have)
        return True if not missing else f"{len(missing)} of {len(produced)} not consumed"
    wait_for("every record to be consumed", all_consumed, 60, consumers)
    have = [(p, o) for c in (c1, c2) for _t, p, o in c.lines()]
    dups = [k for k, n in collections.Counter(have).items() if n > 1]
    assert not dups, f"delivered twice: {dups[:10]}"
    d = np.describe_groups(b.host, b.port, [group]).groups[0]
    assert [m.consumer_id for m in d.members] == ["c1", "c2"], d
    rcs = consumers.stop_all()
    assert rcs == {"c1": 0, "c2": 0}, rcs


def test_leaving_commits_first(native_broker, consumers):
    """6.7: a consumer that leaves commits its final offsets with CommitOffset before
    LeaveGroup, also when it commits automatically (LeaveGroup carries no offsets, and
    the last Heartbeat answer may be up to an interval old). native_consumer.py logs
    the commit; the coordinator then has every partition at its log end."""
    b = native_broker
    topic = unique_topic("native-leave")
    group = unique_topic("g-leave")
    ck_create_topic(b, topic, PARTITIONS)
    produced = set(produce(b, topic, 240, "leave"))
    c1 = consumers.start("c1", group, topic)

    def consumed():
        missing = produced - {(p, o) for _t, p, o in c1.lines()}
        return True if not missing else f"{len(missing)} of {len(produced)} not consumed"
    wait_for("every record to be consumed", consumed, 60, consumers)
    rcs = consumers.stop_all()
    assert rcs == {"c1": 0}, rcs
    end = {(topic, p): max(o for pp, o in produced if pp == p) + 1
           for p in {p for p, _ in produced}}
    commits = [e for e in c1.event_list() if e["event"] == "committed"]
    assert len(commits) == 1, f"commits before leaving: {commits}"
    assert np.offsets_to_dict(commits[0]["offsets"]) == end, commits
    assert all(code == np.NONE for _t, parts in commits[0]["codes"] for _p, code in parts), \
        commits
    left = [e for e in c1.event_list() if e["event"] == "left"]
    assert left and left[0]["mono"] >= commits[0]["mono"], "LeaveGroup went before the commit"
    fo = np.fetch_offsets(b.host, b.port, group, [(topic, sorted(p for _t, p in end))])
    assert fo.offsets() == {tp: (o, np.NONE) for tp, o in end.items()}, fo


def test_an_assignor_that_is_not_loaded_runs_the_default(native_broker):
    """A consumer naming an assignor no plugin provides is not refused (issue 14,
    graceful refusal): it registers and the default assignor (range) assigns it every
    partition; the admin API says the group fell back."""
    b = native_broker
    topic = unique_topic("native-fallback")
    group = unique_topic("g-fallback")
    ck_create_topic(b, topic, 3)
    with np.Conn(b.host, b.port, client_id="drover-it-native") as c:
        ok = c.request(reg(group_id=group, consumer_id="raw-1", topics=[(topic, 1)],
                           assignor="no-such-assignor"), timeout=15)
        assert ok.error_code == np.NONE, ok
        h, req = np.decode_request(c.recv_frame(15))
        assert h.api_key == np.START_FETCHER, f"first coordinator request: {h} {req}"
        assert sorted((t, p) for t, parts in req.assignment for p, _s in parts) == \
            [(topic, p) for p in range(3)], req
        c.send(np.encode_response(h.correlation_id, np.StartFetcherResponse(np.NONE)))
        status, _, body = http_get(f"{b.admin_url}/v1/groups/{group}")
        detail = json.loads(body)
        assert status == 200, body
        assert detail["assignor"] == "no-such-assignor", detail
        assert detail["effective_assignor"] == "range", detail
        assert "not loaded" in detail["assignor_fallback"], detail


def test_refused_registration_then_channel(native_broker):
    """A refused registration leaves an ordinary connection; a valid one on the same
    connection turns it into the channel: StartFetcher (all partitions, −2), then a
    Heartbeat within the interval. A second consumer naming another assignor gets
    INCONSISTENT_GROUP_PROTOCOL."""
    b = native_broker
    topic = unique_topic("native-raw")
    group = unique_topic("g-raw")
    ck_create_topic(b, topic, 3)
    with np.Conn(b.host, b.port, client_id="drover-it-native") as c:
        bad = c.request(reg(group_id=group, topics=[(topic, 1)], session_timeout_ms=10),
                        timeout=15)
        assert bad.error_code == np.INVALID_SESSION_TIMEOUT, bad
        ok = c.request(reg(group_id=group, consumer_id="raw-1", topics=[(topic, 2)],
                           assignor="range"), timeout=15)
        assert ok.error_code == np.NONE, ok
        assert ok.error_message is None
        assert ok.heartbeat_interval_ms == SESSION_TIMEOUT_MS // 3
        assert ok.generation == 0, "a new group starts at generation 0"

        # Now K sends requests. The first is the rebalance's StartFetcher.
        h, req = np.decode_request(c.recv_frame(15))
        assert h.api_key == np.START_FETCHER, f"first coordinator request: {h} {req}"
        assert h.client_id is None, "K sends a null client_id"
        assert req.group_id == group and req.generation >= 1
        assert sorted((t, p, s) for t, parts in req.assignment for p, s in parts) == \
            [(topic, p, np.START_RESET) for p in range(3)], req
        gen = req.generation
        c.send(np.encode_response(h.correlation_id, np.StartFetcherResponse(np.NONE)))

        # A consumer naming another assignor is refused while raw-1 is registered.
        with np.Conn(b.host, b.port) as c2:
            r2 = c2.request(reg(group_id=group, consumer_id="raw-2", topics=[(topic, 1)],
                                assignor="round-robin"), timeout=15)
            assert r2.error_code == np.INCONSISTENT_GROUP_PROTOCOL, r2

        # Heartbeats in our generation, each within a session timeout of our last frame
        # (recv_frame's timeout; no tighter timing is asserted: on two loaded cores a
        # heartbeat came 4 s after the last frame). Answer two.
        for i in range(2):
            h, req = np.decode_request(c.recv_frame(SESSION_TIMEOUT_MS / 1000))
            assert h.api_key == np.HEARTBEAT, f"expected heartbeat {i}, got {h} {req}"
            assert (req.group_id, req.generation) == (group, gen), req
            offsets = [(topic, [(p, 0, None) for p in range(3)])]
            c.send(np.encode_response(h.correlation_id,
                                      np.HeartbeatResponse(np.NONE, True, offsets)))

        # Offsets of the heartbeat answers were committed (0 for every partition).
        def committed_zero():
            fo = np.fetch_offsets(b.host, b.port, group, [(topic, [0, 1, 2])])
            return fo.offsets() == {(topic, p): (0, np.NONE) for p in range(3)} or str(fo)
        wait_for("heartbeat offsets to be committed", committed_zero, 10)

        # DescribeGroups: one entry per requested id, in order, repeats included (5.8).
        d = np.describe_groups(b.host, b.port, [group, "", "no-such-group", group])
        assert [(g.group_id, g.error_code) for g in d.groups] == [
            (group, np.NONE), ("", np.INVALID_GROUP_ID),
            ("no-such-group", np.GROUP_ID_NOT_FOUND), (group, np.NONE)], d
        for g in d.groups[1:3]:  # the fields of an entry with an error are empty
            assert (g.state, g.generation, g.assignor, g.rebalance_mode, g.members,
                    g.held_by_failed) == ("", 0, None, "", [], []), g
        g = d.groups[0]
        assert (g.state, g.generation, g.assignor) == ("stable", gen, "range"), g
        assert [(m.consumer_id, m.generation, np.topic_ints_to_set(m.partitions))
                for m in g.members] == [("raw-1", gen, {(topic, p) for p in range(3)})], g
        every = np.describe_groups(b.host, b.port, None)
        assert group in [g.group_id for g in every.groups], every
        assert all(g.error_code == np.NONE for g in every.groups), every

        # Leaving: LeaveGroup on another connection; K closes the channel.
        with np.Conn(b.host, b.port) as c3:
            lr = c3.request(np.LeaveGroupRequest(group, "raw-1"), timeout=15)
            assert lr.error_code == np.NONE, lr
        deadline = time.monotonic() + 10
        while True:
            try:
                f = c.poll_frame(0.5)
            except np.ProtocolError:
                break  # closed, as 6.7 says
            if f is not None:
                h, req = np.decode_request(f)
                assert h.api_key == np.HEARTBEAT, f"after LeaveGroup: {h} {req}"
            assert time.monotonic() < deadline, "K kept the channel open after LeaveGroup"


def test_consumer_script_reports_refusal(native_broker, tmp_path):
    """native_consumer.py exits 2 with the precise code when its registration is refused."""
    out = tmp_path / "c.out"
    r = subprocess.run(
        [sys.executable, str(CONSUMER_SCRIPT), "--bootstrap", native_broker.bootstrap,
         "--group", "g-script", "--consumer-id", "c", "--topic", "t", "--out", str(out),
         "--session-timeout-ms", "1000", "--max-runtime-s", "30"],
        capture_output=True, timeout=60, preexec_fn=_die_with_parent)
    err = r.stderr.decode(errors="replace")
    assert r.returncode == 2, f"exit {r.returncode}\n{err[-3000:]}"
    assert f"REGISTER_ERROR {np.INVALID_SESSION_TIMEOUT} INVALID_SESSION_TIMEOUT" in err, err[-3000:]
