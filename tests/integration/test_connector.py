"""The consumer connector (`drover-client`, as `drover consume`) against the real broker,
with real processes: group failover after kill -9, a coordinator channel cut without a
close (a Kafka-aware proxy in front of one consumer) and a frozen consumer (SIGSTOP),
wildcard subscriptions following new topics and partitions, committed offsets across a
broker restart, and clear errors for bad input.

Every consumer is a `drover consume --format offsets` subprocess: one stdout line
`topic partition offset` per message, flushed at once, and `event ...` lines on stderr.
The reader threads stamp each line with its arrival time (time.monotonic()). On
failure every consumer's stderr (with those times) and the broker's log are printed.

The broker runs the coordinator with short timings (connector_testlib.CONFIG): minimum
session timeout 1 s, rebalance delay 100 ms, heartbeat offsets stored every 200 ms.
"""

from __future__ import annotations

import collections
import re
import signal
import socket
import subprocess
import threading
import time

import pytest

import native_protocol as np
from conftest import BrokerError, drover_bin
from connector_testlib import (BackgroundProducer, Consumers, KafkaProxy, admin_group,
                               broker_log_since, committed_offsets, consumer_args,
                               produce_keyed, start_connector_broker, wait_for)
from drover_testlib import api_versions, ck_admin, ck_create_topic, wait_topic_partitions

SESSION_MS = 2000
SESSION_S = SESSION_MS / 1000


# ---------------------------------------------------------------------------------
# Fixtures
# ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def shared_broker(tmp_path_factory):
    """One broker for the whole module (loading the debug plugin libraries takes
    seconds); every test uses its own topics and groups."""
    b = start_connector_broker(tmp_path_factory.mktemp("connector-broker"))
    yield b
    b.kill9()


@pytest.fixture
def cbroker(shared_broker, request):
    """The shared broker (started again if a test left it down); on failure, prints
    what it logged during the test."""
    b = shared_broker
    if not b.alive():
        try:
            b.start()
        except BrokerError as e:
            pytest.fail(str(e), pytrace=False)
    mark = (b.starts, len(b.stderr_text()))
    yield b
    rep = getattr(request.node, "rep_call", None)
    if rep is not None and rep.failed:
        print(f"\n===== broker log during this test (tail) =====\n{broker_log_since(b, mark)}")


@pytest.fixture
def consumers(tmp_path, request):
    cs = Consumers(tmp_path)
    yield cs
    cs.stop_all()
    rep = getattr(request.node, "rep_call", None)
    if rep is not None and rep.failed:
        print("\n" + cs.dump())


# ---------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------
def all_parts(topic: str, n: int) -> set[tuple[str, int]]:
    return {(topic, p) for p in range(n)}


def balanced(procs, topic: str, partitions: int):
    """True when the consumers agree on a generation and each owns its equal share of
    the topic's partitions, together all of them; else a description."""
    views = {c.name: c.owned() for c in procs}
    gens = {g for g, _ in views.values()}
    share = partitions // len(procs)
    union = set().union(*(o for _, o in views.values()))
    if len(gens) != 1 or None in gens or union != all_parts(topic, partitions) \
            or any(len(o) != share for _, o in views.values()):
        return f"views {views}"
    return True


def printed(procs, topic: str | None = None) -> set[tuple[int, int]]:
    return {(ln.partition, ln.offset) for c in procs for ln in c.lines()
            if topic is None or ln.topic == topic}


def coverage(procs, produced: set[tuple[int, int]], topic: str):
    missing = produced - printed(procs, topic)
    if missing:
        return f"{len(missing)} of {len(produced)} records not printed yet, e.g. {sorted(missing)[:5]}"
    return True


def last_offsets(lines) -> dict[int, int]:
    out: dict[int, int] = {}
    for ln in lines:
        out[ln.partition] = max(out.get(ln.partition, -1), ln.offset)
    return out


def log_ends(produced) -> dict[int, int]:
    ends: dict[int, int] = {}
    for p, o in produced:
        ends[p] = max(ends.get(p, -1), o + 1)
    return ends


# ---------------------------------------------------------------------------------
# 1. A group of 3, 100,000 records, kill -9 of one mid-consumption
# ---------------------------------------------------------------------------------
def test_kill9_failover_at_committed_offsets(cbroker, consumers):
    b = cbroker
    topic, group, parts = "conn-kill", "g-kill", 6
    ck_create_topic(b, topic, parts)
    names = ["c0", "c1", "c2"]
    procs = [consumers.start(n, *consumer_args(b, group, "--topic", f"{topic}:2",
                                               consumer_id=n, session_timeout_ms=SESSION_MS))
             for n in names]
    wait_for("3 consumers to split 6 partitions", lambda: balanced(procs, topic, parts), 30,
             check=consumers.assert_running)
    victim = consumers.procs["c1"]
    survivors = [consumers.procs["c0"], consumers.procs["c2"]]
    victim_parts = victim.owned()[1]
    gen1 = victim.owned()[0]

    # First half, produced while the group consumes; the victim is killed while it is
    # still printing, once it has printed most of its share (its partitions get about a
    # third of the records; 13,000 is ~80% of that).
    halves: list[list] = [[], []]
    killed = threading.Event()

    def produce_halves():
        # The first half in paced chunks, so the group consumes it live.
        for start in range(0, 50_000, 2_000):
            halves[0].extend(produce_keyed(b, topic, 2_000, start=start))
            time.sleep(0.05)
        # Second half once the victim is dead, while the survivors wait out its session.
        killed.wait(90)
        halves[1].extend(produce_keyed(b, topic, 50_000, start=50_000))
    producer = threading.Thread(target=produce_halves, daemon=True)
    producer.start()

    def victim_mostly_done():
        n = len([ln for ln in victim.lines() if (ln.topic, ln.partition) in victim_parts])
        return True if n >= 13_000 else f"victim printed {n}"
    wait_for("the victim to consume most of its share of the first half", victim_mostly_done, 60,
             check=consumers.assert_running)
    t_kill = victim.kill9()
    killed.set()

    # Committed offsets as the admin API shows them, until every victim partition has a
    # new owner: the takeover must start at the last value seen before it.
    history: list[tuple[float, dict]] = []
    takeover: dict[tuple[str, int], tuple[str, float, int]] = {}  # tp -> (owner, ts, gen)
    deadline = time.monotonic() + SESSION_S + 20
    while len(takeover) < len(victim_parts):
        assert time.monotonic() < deadline, (
            f"survivors did not get the victim's partitions {sorted(victim_parts)} within "
            f"{SESSION_S + 20:.0f} s of the kill; got {takeover}")
        consumers.assert_running("c0", "c2")
        t_req = time.monotonic()
        history.append((t_req, committed_offsets(b, group)))
        for s in survivors:
            for ts, gen, tps in s.assignments():
                if ts < t_kill or gen <= gen1:
                    continue
                for tp in tps & victim_parts:
                    takeover.setdefault(tp, (s.name, ts, gen))
        time.sleep(0.1)
    producer.join(timeout=120)
    assert not producer.is_alive(), "records not produced within 120 s"
    assert len(halves[0]) == len(halves[1]) == 50_000
    produced = set(halves[0]) | set(halves[1])
    assert len(produced) == 100_000
    assert {p for p, _ in produced} == set(range(parts)), "keys did not reach every partition"

    victim_share = {(p, o) for p, o in halves[0] if (topic, p) in victim_parts}
    victim_last = last_offsets(ln for ln in victim.lines() if (ln.topic, ln.partition) in victim_parts)
    n_victim = len(printed([victim], topic) & victim_share)
    print(f"killed c1 having printed {n_victim} of its {len(victim_share)} first-half records; "
          f"last offsets {victim_last}")
    assert n_victim < len(victim_share), \
        "the victim had printed its whole share of the first half: not killed mid-consumption"

    wait_for("all 100,000 records to be printed", lambda: coverage(procs, produced, topic), 90,
             check=lambda: consumers.assert_running("c0", "c2"))

    # Takeover at the committed offsets.
    problems = []
    for tp, (owner, ts, gen) in sorted(takeover.items()):
        p = tp[1]
        before = [snap for t_req, snap in history if t_req < ts]
        assert before, f"{tp}: no committed-offset snapshot before the takeover"
        committed = before[-1].get(tp)
        owner_lines = [ln for ln in consumers.procs[owner].lines()
                       if (ln.topic, ln.partition) == tp and ln.ts >= ts]
        first = owner_lines[0].offset if owner_lines else None
        vlast = victim_last.get(p, -1)
        print(f"{topic}-{p}: victim printed up to {vlast}, committed at takeover {committed}, "
              f"{owner} (generation {gen}, {ts - t_kill:.2f} s after the kill) "
              f"first printed {first}")
        expect_start = committed if committed is not None else 0
        if first is None:
            problems.append(f"{tp}: new owner {owner} printed nothing of it")
            continue
        if first > vlast + 1:
            problems.append(f"{tp}: new owner {owner} started at {first}, but the victim only "
                            f"printed up to {vlast}: offsets {vlast + 1}..{first - 1} were "
                            f"never printed by anyone before the takeover (committed {committed})")
        if first != expect_start:
            problems.append(f"{tp}: new owner {owner} started at {first}, committed offset at "
                            f"takeover was {committed}")
        if committed is not None and committed > vlast + 1:
            problems.append(f"{tp}: committed {committed} is beyond the last offset the victim "
                            f"printed ({vlast})")

    # Delivery: nothing missing; duplicates only on the victim's partitions, in the
    # range the new owner re-read (committed offset .. what the victim had printed).
    per = {c.name: collections.Counter((ln.partition, ln.offset) for ln in c.lines()
                                       if ln.topic == topic) for c in procs}
    total = collections.Counter()
    for cnt in per.values():
        total.update(cnt)
    missing = produced - set(total)
    if missing:
        by_p = collections.Counter(p for p, _ in missing)
        problems.append(f"{len(missing)} records never printed (per partition {dict(by_p)}), "
                        f"e.g. {sorted(missing)[:10]}")
    for name, cnt in per.items():
        twice = [k for k, n in cnt.items() if n > 1]
        if twice:
            problems.append(f"{name} printed {len(twice)} records twice, e.g. {sorted(twice)[:5]}")
    bad_dups = [(p, o, n) for (p, o), n in total.items() if n > 1
                and not ((topic, p) in victim_parts and per["c1"][(p, o)] == 1
                         and o <= victim_last.get(p, -1))]
    if bad_dups:
        problems.append(f"{len(bad_dups)} records printed more than once outside the victim's "
                        f"re-read range, e.g. {sorted(bad_dups)[:10]}")
    n_dups = sum(1 for n in total.values() if n > 1)
    print(f"{len(total)} distinct records printed, {n_dups} redelivered after the kill")
    assert not problems, "\n".join(problems)

    for s in survivors:
        rc = s.terminate()
        assert rc == 0, f"{s.name} exited {rc} on SIGTERM\n{s.tail()}"


# ---------------------------------------------------------------------------------
# 2a. The coordinator channel of one consumer is cut without a close
# ---------------------------------------------------------------------------------
def test_cut_channel_stops_delivery_before_takeover(cbroker, consumers):
    """The victim reaches the broker only through a Kafka-aware proxy (Metadata and
    FindCoordinator answers rewritten to the proxy's address), so its coordinator
    channel, fetches and commits all go through it. The proxy then blackholes the
    channel — nothing forwarded either way, nothing closed — while fetches keep working
    and records keep coming. The victim must stop delivering its partitions (lease
    expiry) before either survivor is assigned them or prints one of their records."""
    b = cbroker
    topic, group, parts = "conn-cut", "g-cut", 6
    ck_create_topic(b, topic, parts)
    proxy = KafkaProxy(b)
    try:
        a = consumers.start("a", *consumer_args(b, group, "--topic", topic, consumer_id="a",
                                                session_timeout_ms=SESSION_MS))
        c = consumers.start("c", *consumer_args(b, group, "--topic", topic, consumer_id="c",
                                                session_timeout_ms=SESSION_MS))
        v = consumers.start("v", *consumer_args(b, group, "--topic", topic, consumer_id="v",
                                                session_timeout_ms=SESSION_MS,
                                                brokers=proxy.address))
        procs = [a, c, v]
        wait_for("3 consumers to split 6 partitions", lambda: balanced(procs, topic, parts), 30,
                 check=consumers.assert_running)
        assert not proxy.errors, proxy.errors
        assert proxy.rewrites > 0, "the proxy rewrote no Metadata/FindCoordinator answer"
        assert len(proxy.channels()) == 1, \
            f"the victim's coordinator channel does not go through the proxy: {proxy.channel_log}"
        gen1, vparts = v.owned()

        with BackgroundProducer(b, topic, batch=100, pause=0.02) as bg:
            def victim_delivering():
                n = len([ln for ln in v.lines() if (ln.topic, ln.partition) in vparts])
                return True if n >= 500 else f"victim printed {n}"
            wait_for("the victim to deliver live records", victim_delivering, 20,
                     check=consumers.assert_running)
            t_cut = proxy.cut_channels()

            def taken_over():
                got = set()
                for s in (a, c):
                    for ts, gen, tps in s.assignments():
                        if ts > t_cut and gen > gen1:
                            got |= tps & vparts
                return True if got == vparts else f"survivors have {sorted(got)} of {sorted(vparts)}"
            wait_for("the survivors to be assigned the victim's partitions", taken_over,
                     SESSION_S + 15, check=consumers.assert_running)
            # Let the survivors deliver, and give the victim time to misbehave.
            time.sleep(1.5)
            produced = bg.stop()

        # The safety invariant, partition by partition.
        problems = []
        # Rule 6.2 (d): the coordinator may hand the victim's partitions to another
        # consumer only once a session timeout has passed since it last received a
        # frame on the victim's channel, which is no earlier than the proxy forwarded it.
        cut_channels = [ch for ch in proxy.conns if ch.cut.is_set() and ch.turned]
        assert len(cut_channels) == 1, f"cut channels: {[(ch.n, ch.log[-3:]) for ch in cut_channels]}"
        chlog = cut_channels[0].log
        up = [ts for ts, d, _api in chlog if d == "C->K" and ts <= t_cut]
        assert up, "the victim never answered on its channel"
        last_heard = max(up)
        print(f"victim channel frames around the cut (s from the cut): "
              f"{[(round(ts - t_cut, 3), d, api) for ts, d, api in chlog[-6:]]}")
        lost = [(ts, rest) for ts, kind, rest in v.events() if kind == "lost" and ts > t_cut]
        print(f"victim events after the cut: "
              f"{[(round(ts - t_cut, 3), k, r) for ts, k, r in v.events() if ts > t_cut]}")
        if not lost:
            problems.append("the victim printed no `event lost` after its channel was cut")
        else:
            print(f"victim lost its channel {lost[0][0] - t_cut:.3f} s after the cut: {lost[0][1]}")
        vlines = [ln for ln in v.lines() if ln.ts > t_cut]
        for tp in sorted(vparts):
            mine = [ln for ln in vlines if (ln.topic, ln.partition) == tp]
            assigned = min(ts for s in (a, c) for ts, gen, tps in s.assignments()
                           if ts > t_cut and gen > gen1 and tp in tps)
            theirs = [ln for s in (a, c) for ln in s.lines()
                      if (ln.topic, ln.partition) == tp and ln.ts > t_cut]
            first_theirs = min((ln.ts for ln in theirs), default=None)
            last_mine = max((ln.ts for ln in mine), default=None)
            print(f"{tp}: victim printed {len(mine)} records after the cut, the last "
                  f"{'-' if last_mine is None else f'{last_mine - t_cut:.3f}'} s after it; "
                  f"assigned to a survivor {assigned - t_cut:.3f} s after the cut; survivors' "
                  f"first record {'-' if first_theirs is None else f'{first_theirs - t_cut:.3f}'} s")
            if assigned < last_heard + SESSION_S:
                problems.append(
                    f"{tp}: assigned to a survivor {assigned - last_heard:.3f} s after the "
                    f"coordinator last received a frame on the victim's channel, less than "
                    f"the session timeout ({SESSION_S} s; rule 6.2 d)")
            if last_mine is not None and last_mine >= assigned:
                problems.append(f"{tp}: the victim printed a record {last_mine - assigned:.3f} s "
                                f"after a survivor was assigned the partition")
            if last_mine is not None and first_theirs is not None and last_mine >= first_theirs:
                problems.append(f"{tp}: the victim printed a record {last_mine - first_theirs:.3f} s "
                                "after a survivor printed one of the same partition")
            late = [ln for ln in mine if lost and ln.ts > lost[0][0] + 0.05]
            if late:
                problems.append(f"{tp}: {len(late)} records printed by the victim after its "
                                f"`event lost` line (offsets {late[0].offset}..{late[-1].offset})")
        assert not problems, "\n".join(problems)

        # Heal the link: the victim re-registers and the group covers everything.
        proxy.heal()
        wait_for("the group to rebalance to 3 members after the link heals",
                 lambda: balanced(procs, topic, parts), SESSION_S + 30,
                 check=consumers.assert_running)
        wait_for("every record to be printed", lambda: coverage(procs, produced, topic), 60,
                 check=consumers.assert_running)
        assert not proxy.errors, proxy.errors
    finally:
        proxy.close()


# ---------------------------------------------------------------------------------
# 2b. A consumer frozen with SIGSTOP (channel open but silent), then resumed
# ---------------------------------------------------------------------------------
@pytest.mark.parametrize("stdout", ["read", "full"])
def test_frozen_consumer_prints_nothing_stale_after_resume(cbroker, consumers, stdout):
    """SIGSTOP one consumer while it has a backlog; the others take its partitions,
    consume everything and commit it; SIGCONT. The resumed consumer's lease expired
    long ago: it must drop its old partitions before delivering anything, so it prints
    no record but those it had begun delivering before the freeze (everything else was
    delivered and committed by the others).
    `read`: the test reads the consumer's stdout all along. `full`: the test stops
    reading it for a moment before the SIGSTOP, so the consumer is frozen while its
    output is backed up (a slow application), and reads it all again while it is
    stopped; the one write blocked at the freeze completes after SIGCONT and is
    allowed (it began while the lease held), as are records already past the delivery
    gate in the CLI's printer queue at the freeze (they continue exactly where its
    output stopped)."""
    b = cbroker
    topic, group, parts = f"conn-stop-{stdout}", f"g-stop-{stdout}", 6
    ck_create_topic(b, topic, parts)
    procs = [consumers.start(n, *consumer_args(b, group, "--topic", topic, consumer_id=n,
                                               session_timeout_ms=SESSION_MS))
             for n in ("s0", "s1", "s2")]
    wait_for("3 consumers to split 6 partitions", lambda: balanced(procs, topic, parts), 30,
             check=consumers.assert_running)
    victim, others = procs[1], [procs[0], procs[2]]
    gen1, vparts = victim.owned()

    produced: set[tuple[int, int]] = set()
    stopped_at: list[float] = []

    def freeze_when_busy():
        def busy():
            n = len([ln for ln in victim.lines() if (ln.topic, ln.partition) in vparts])
            return True if n >= 2000 else f"victim printed {n}"
        wait_for("the victim to be consuming", busy, 30)
        if stdout == "full":
            victim.out.reading.clear()
            time.sleep(0.5)
        stopped_at.append(victim.signal(signal.SIGSTOP))
        victim.out.reading.set()

    freezer = threading.Thread(target=freeze_when_busy, daemon=True)
    freezer.start()
    produced |= set(produce_keyed(b, topic, 60_000))
    freezer.join(timeout=40)
    assert stopped_at, "the victim was never frozen (it did not print 2000 records)"
    t_stop = stopped_at[0]
    time.sleep(0.3)  # what it wrote before the stop is read by now
    before = victim.lines()
    vlast = last_offsets(ln for ln in before if (ln.topic, ln.partition) in vparts)
    print(f"froze {victim.name} having printed {len(before)} records; last offsets of its "
          f"partitions {vlast}")

    def others_took_over():
        got = set()
        for s in others:
            for ts, gen, tps in s.assignments():
                if ts > t_stop and gen > gen1:
                    got |= tps & vparts
        return True if got == vparts else f"others have {sorted(got)} of {sorted(vparts)}"
    wait_for("the others to be assigned the frozen consumer's partitions", others_took_over,
             SESSION_S + 15, check=lambda: consumers.assert_running("s0", "s2"))
    ends = log_ends(produced)
    want = {(topic, p): e for p, e in ends.items()}

    def all_committed():
        c = committed_offsets(b, group)
        return True if all(c.get(tp) == e for tp, e in want.items()) else f"committed {c}, ends {want}"
    wait_for("the others to consume and commit up to the log end of every partition",
             all_committed, 30, check=lambda: consumers.assert_running("s0", "s2"))
    time.sleep(0.3)

    problems = []
    # Every record was printed by someone before the frozen consumer resumes: where the
    # others started is the committed offset, so the frozen consumer must have printed
    # everything below it.
    missing = produced - printed(procs, topic)
    if missing:
        starts = {}
        for s in others:
            for ln in s.lines():
                if (ln.topic, ln.partition) in vparts and ln.ts > t_stop:
                    starts.setdefault(ln.partition, ln.offset)
        by_p = collections.defaultdict(list)
        for p, o in missing:
            by_p[p].append(o)
        problems.append(
            f"before SIGCONT, {len(missing)} records were printed by nobody although the "
            "group's offsets were committed past them: " + "; ".join(
                f"{topic}-{p}: offsets {min(o)}..{max(o)} ({len(o)} records); the frozen "
                f"consumer printed up to {vlast.get(p)}, the new owner started at {starts.get(p)}"
                for p, o in sorted(by_p.items())))

    n0 = len(victim.lines())
    t_cont = victim.signal(signal.SIGCONT)

    def rejoined():
        evs = [(k, r) for ts, k, r in victim.events() if ts > t_cont]
        return True if any(k == "assigned" for k, _ in evs) else f"victim events since SIGCONT {evs}"
    try:
        wait_for("the resumed consumer to re-register and be assigned", rejoined, SESSION_S + 20,
                 check=consumers.assert_running)
    except AssertionError as e:
        problems.append(str(e))
    time.sleep(1.0)
    after = victim.lines()[n0:]
    # `drover consume` can hold at most 1024 (printer channel) + 1 per stream + 1 (being
    # written) records that passed the connector's delivery gate but are not printed
    # yet. Records that continue exactly where the consumer's output stopped, within
    # that bound, may have passed the gate while the lease still held (deliveries begun
    # before the freeze, printed after it: a write blocked on the full pipe in `full`,
    # or a record between the gate and the printer when SIGSTOP landed). Anything else
    # passed the gate after the wake-up.
    held = 1024 + 1 + 1
    if after and len(after) <= held and all((ln.topic, ln.partition) in vparts for ln in after):
        expect = {tp: vlast.get(tp[1], -1) + 1 for tp in vparts}
        contiguous = True
        for ln in after:
            tp = (ln.topic, ln.partition)
            if ln.offset != expect[tp]:
                contiguous = False
                break
            expect[tp] += 1
        if contiguous:
            print(f"{len(after)} deliveries begun before the freeze printed after SIGCONT: "
                  f"{after[:3]}")
            after = []
    evs = [(round(ts - t_cont, 3), k, r) for ts, k, r in victim.events() if ts > t_cont]
    print(f"victim events after SIGCONT: {evs}")
    if after:
        by_tp = collections.defaultdict(list)
        for ln in after:
            by_tp[(ln.topic, ln.partition)].append(ln)
        detail = "; ".join(
            f"{t}-{p}: {len(lns)} records, offsets {min(ln.offset for ln in lns)}.."
            f"{max(ln.offset for ln in lns)} (it had printed up to {vlast.get(p)} before the "
            f"freeze), the first {lns[0].ts - t_cont:.3f} s after SIGCONT"
            for (t, p), lns in sorted(by_tp.items()))
        stale = [ln for ln in after if (ln.topic, ln.partition) in vparts]
        note = (f"; that is more than the {held} records the CLI can hold between the "
                f"connector's delivery gate and stdout, so at least {len(after) - held} of them "
                "passed the gate after the wake-up" if len(after) > held else
                f"; no more than the {held} records the CLI can hold between the connector's "
                "delivery gate and stdout, so they may all have passed the gate before the "
                "freeze")
        problems.append(
            f"after SIGCONT the resumed consumer printed {len(after)} records ({len(stale)} of its "
            f"old partitions {sorted(vparts)}), although the others owned every partition and "
            f"the group had committed up to the log end: {detail}{note}")
    assert not problems, "\n".join(problems)


# ---------------------------------------------------------------------------------
# 3. Wildcard subscriptions follow new topics and partitions
# ---------------------------------------------------------------------------------
def test_whitelist_picks_up_new_topic(cbroker, consumers):
    b = cbroker
    ck_create_topic(b, "wc-a", 2)
    ck_create_topic(b, "other", 1)
    produced = {("wc-a", p, o) for p, o in produce_keyed(b, "wc-a", 200)}
    produce_keyed(b, "other", 50)
    w = consumers.start("w", *consumer_args(b, "g-wc", "--whitelist", "wc-.*", consumer_id="w",
                                            session_timeout_ms=SESSION_MS,
                                            extra=("--streams", "2")))

    def got(wanted):
        have = {(ln.topic, ln.partition, ln.offset) for ln in w.lines()}
        missing = wanted - have
        return True if not missing else f"{len(missing)} not printed, e.g. {sorted(missing)[:5]}"
    wait_for("the existing matching topic to be consumed", lambda: got(produced), 30,
             check=consumers.assert_running)

    t_create = time.monotonic()
    ck_create_topic(b, "wc-new", 3)
    new = {("wc-new", p, o) for p, o in produce_keyed(b, "wc-new", 300)}
    assert {p for _, p, _ in new} == {0, 1, 2}
    wait_for("records of the topic created later (wc-new) to be consumed without a restart",
             lambda: got(new), 30, check=consumers.assert_running)
    print(f"wc-new consumed {time.monotonic() - t_create:.2f} s after its creation; "
          f"assignments {[(round(ts - t_create, 3), g, sorted(tps)) for ts, g, tps in w.assignments()]}")
    assert w.running(), "the consumer restarted or exited"
    others = [ln for ln in w.lines() if not ln.topic.startswith("wc-")]
    assert not others, f"records of non-matching topics printed: {others[:5]}"
    assert w.terminate() == 0


@pytest.mark.parametrize("sub", ["whitelist", "topic"])
def test_partition_increase_picked_up(cbroker, consumers, sub):
    b = cbroker
    if 37 not in api_versions(b):
        pytest.skip("CreatePartitions (API 37) is not served by this broker yet")
    from confluent_kafka.admin import NewPartitions
    topic = f"grow-{sub}"
    ck_create_topic(b, topic, 2)
    produced = {(topic, p, o) for p, o in produce_keyed(b, topic, 200)}
    subscription = ("--whitelist", f"grow-{sub}.*") if sub == "whitelist" else ("--topic", topic)
    w = consumers.start("w", *consumer_args(b, f"g-grow-{sub}", *subscription, consumer_id="w",
                                            session_timeout_ms=SESSION_MS))

    def got(wanted):
        have = {(ln.topic, ln.partition, ln.offset) for ln in w.lines()}
        missing = wanted - have
        return True if not missing else f"{len(missing)} not printed, e.g. {sorted(missing)[:5]}"
    wait_for("the topic to be consumed", lambda: got(produced), 30, check=consumers.assert_running)

    admin = ck_admin(b)
    t_grow = time.monotonic()
    fs = admin.create_partitions([NewPartitions(topic, 4)], operation_timeout=15,
                                 request_timeout=15)
    fs[topic].result(timeout=20)
    wait_topic_partitions(b, topic, 4)
    new = set()
    for p in (2, 3):
        new |= {(topic, pp, o) for pp, o in produce_keyed(b, topic, 50, partition=p)}
    assert {p for _, p, _ in new} == {2, 3}
    wait_for("records of the new partitions 2 and 3 to be consumed", lambda: got(new), 30,
             check=consumers.assert_running)
    print(f"new partitions consumed {time.monotonic() - t_grow:.2f} s after create_partitions; "
          f"assignments {[(round(ts - t_grow, 3), g, sorted(tps)) for ts, g, tps in w.assignments()]}")
    assert w.owned()[1] == all_parts(topic, 4)
    assert w.terminate() == 0


# ---------------------------------------------------------------------------------
# 3b. Member data: --rack, --weight, --label (RegisterConsumer v1)
# ---------------------------------------------------------------------------------
def test_consume_with_rack_and_weight_registers_v1(cbroker, consumers):
    """`drover consume --rack a --weight 2 --label tier=gold` registers with
    RegisterConsumer v1 (its log says so) beside a consumer that declares nothing (v0)
    in the same group: the coordinator accepts both, the admin API lists both members,
    and every record is printed exactly once."""
    b = cbroker
    topic, group = "member-data", "g-member-data"
    ck_create_topic(b, topic, 4)
    produced = {(topic, p, o) for p, o in produce_keyed(b, topic, 400)}
    a = consumers.start("a", *consumer_args(b, group, "--topic", topic, consumer_id="a",
                                            session_timeout_ms=SESSION_MS,
                                            extra=("--rack", "a", "--weight", "2",
                                                   "--label", "tier=gold")))
    plain = consumers.start("plain", *consumer_args(b, group, "--topic", topic,
                                                    consumer_id="plain",
                                                    session_timeout_ms=SESSION_MS))

    def printed():
        have = [(ln.topic, ln.partition, ln.offset) for c in (a, plain) for ln in c.lines()]
        missing = produced - set(have)
        return True if not missing else f"{len(missing)} of {len(produced)} not printed"
    wait_for("every record to be printed", printed, 60, check=consumers.assert_running)
    have = [(ln.topic, ln.partition, ln.offset) for c in (a, plain) for ln in c.lines()]
    dups = [k for k, n in collections.Counter(have).items() if n > 1]
    assert not dups, f"printed twice: {dups[:10]}"

    def both_members():
        g = admin_group(b, group)
        ids = sorted(m["consumer_id"] for m in (g or {}).get("members", []))
        return True if ids == ["a", "plain"] else f"members {ids}"
    wait_for("the admin API to list both members", both_members, 20)
    versions = {name: [t for _, t in c.stderr_lines() if "registered" in t and "version=" in t]
                for name, c in (("a", a), ("plain", plain))}
    assert any("version=1" in t for t in versions["a"]), versions
    assert all("version=0" in t for t in versions["plain"]) and versions["plain"], versions
    assert a.terminate() == 0
    assert plain.terminate() == 0


def test_consume_two_topics_given_out_of_name_order(cbroker, consumers):
    """`drover consume --topic zz-order --topic aa-order` (flags not in alphabetical
    order) prints every record of both topics; the streams were split by topic name
    against their flag order, which panicked (`split_off` out of range)."""
    b = cbroker
    group = "g-out-of-order"
    produced = set()
    for topic in ("zz-order", "aa-order"):
        ck_create_topic(b, topic, 2)
        produced |= {(topic, p, o) for p, o in produce_keyed(b, topic, 100)}
    c = consumers.start("c", *consumer_args(b, group, "--topic", "zz-order",
                                            "--topic", "aa-order", consumer_id="c",
                                            session_timeout_ms=SESSION_MS))

    def printed():
        have = {(ln.topic, ln.partition, ln.offset) for ln in c.lines()}
        missing = produced - have
        return True if not missing else f"{len(missing)} of {len(produced)} not printed"
    wait_for("every record of both topics to be printed", printed, 60,
             check=consumers.assert_running)
    assert c.terminate() == 0


def test_consume_refuses_bad_member_data(cbroker):
    """Member data that breaks docs/protocol.md §5.1 is refused before anything is sent,
    with a message naming the value."""
    b = cbroker
    for extra, says in ((["--weight", "0"], "weight 0"), (["--rack", ""], "empty rack"),
                        (["--label", "novalue"], "KEY=VALUE")):
        rc, err, _took = run_consume(["--brokers", b.bootstrap, "--group", "g-bad-member",
                                      "--topic", "member-data", *extra], timeout=30)
        assert rc != 0 and says in err, f"{extra}: exit {rc}, stderr {err[-500:]!r}"


def test_explicit_committer_hands_over_processed_offsets_at_stop_fetcher(cbroker, consumers):
    """A consumer that commits explicitly (`--no-auto-commit`: its Heartbeat answers
    carry no offsets, nothing is committed periodically) still answers StopFetcher with
    the processed offsets of the partitions it stops (docs/protocol.md §5.3, §6.5): when
    a second consumer joins and takes half the partitions, they are committed at the
    handover and the newcomer starts after what the first printed, redelivering
    nothing."""
    b = cbroker
    topic, group = "explicit-handover", "g-explicit-handover"
    ck_create_topic(b, topic, 4)
    first = {(topic, p, o) for p, o in produce_keyed(b, topic, 200)}
    a = consumers.start("a", *consumer_args(b, group, "--topic", topic, consumer_id="a",
                                            session_timeout_ms=SESSION_MS,
                                            extra=("--no-auto-commit",)))

    def printed(cs, wanted):
        have = {(ln.topic, ln.partition, ln.offset) for c in cs for ln in c.lines()}
        missing = wanted - have
        return True if not missing else f"{len(missing)} of {len(wanted)} not printed"
    wait_for("the first consumer to print every record", lambda: printed([a], first), 60,
             check=consumers.assert_running)
    c = consumers.start("c", *consumer_args(b, group, "--topic", topic, consumer_id="c",
                                            session_timeout_ms=SESSION_MS,
                                            extra=("--no-auto-commit",)))

    def moved():
        _gen, owned = c.owned()
        return owned or "the newcomer owns nothing yet"
    taken = wait_for("the newcomer to be assigned partitions", moved, 30,
                     check=consumers.assert_running)
    end = {p: max(o for t, pp, o in first if pp == p) + 1 for p in range(4)}
    committed = committed_offsets(b, group)
    for tp in taken:
        assert committed.get(tp) == end[tp[1]], \
            f"{tp}: committed {committed.get(tp)} at the handover, want {end[tp[1]]}; {committed}"
    second = {(topic, p, o) for p, o in produce_keyed(b, topic, 100, start=200)}
    wait_for("the second batch to be printed", lambda: printed([a, c], second), 60,
             check=consumers.assert_running)
    again = [(ln.partition, ln.offset) for ln in c.lines() if (topic, ln.partition, ln.offset)
             in first]
    assert not again, f"the newcomer redelivered {len(again)} processed records: {again[:10]}"
    both = collections.Counter((ln.partition, ln.offset) for x in (a, c) for ln in x.lines())
    assert not [k for k, n in both.items() if n > 1], "a record was printed twice"
    assert a.terminate() == 0
    assert c.terminate() == 0


def test_offset_out_of_range_under_reset_none_backs_off_and_reports(cbroker, consumers):
    """A committed offset past the log end with --reset none kills the partition's
    fetcher at every start (docs/protocol.md §6.3). `drover consume` hands the error to
    the application (its stream yields it: the `error` lines on stderr) and registers
    again after a backoff that doubles up to its cap, as it logs: 200, 400, 800, 800 ms
    (it used to re-register at once, rebalancing the group every heartbeat)."""
    b = cbroker
    topic, group = "oor-none", "g-oor-none"
    ck_create_topic(b, topic, 1)
    produce_keyed(b, topic, 20)
    # The non-member commit of §5.5, while the group has no consumers.
    with np.Conn(b.host, b.port, client_id="drover-it") as c:
        r = c.request(np.CommitOffsetRequest(group, "", -1, [(topic, [(0, 1000, None)])]),
                      timeout=15)
    assert r.topics == [(topic, [(0, np.NONE)])], r
    n = consumers.start("oor", *consumer_args(
        b, group, "--topic", topic, consumer_id="oor", session_timeout_ms=SESSION_MS,
        extra=("--reset", "none", "--fetcher-failure-backoff-ms", "200",
               "--fetcher-failure-backoff-max-ms", "800")))

    def backoffs():
        got = [int(m.group(1)) for _, t in n.stderr_lines()
               if (m := re.search(r"a fetcher died; re-registering in (\d+) ms", t))]
        return got if len(got) >= 4 else f"backoffs logged so far: {got}"
    got = wait_for("four re-registrations after a dead fetcher", backoffs, 60,
                   check=consumers.assert_running)
    assert got[:4] == [200, 400, 800, 800], got
    errors = [t for _, t in n.stderr_lines() if t.startswith("error ")]
    assert errors, "the application was not told"
    assert all(f"{topic}-0 is out of range" in t for t in errors), errors
    assert any("1000" in t and "(log 0..20)" in t for t in errors), errors
    assert not n.lines(), "records printed from a partition that cannot be read"
    n.terminate()


# ---------------------------------------------------------------------------------
# 4. Committed offsets survive a broker restart
# ---------------------------------------------------------------------------------
STOPS = ["sigterm-idle", "sigterm-busy", "max-messages"]


@pytest.mark.parametrize("stop", STOPS)
def test_committed_offsets_survive_broker_restart(cbroker, consumers, stop):
    """The first consumer reads about half the records and stops, committing and
    leaving: `sigterm-idle` — SIGTERM once it has printed all of a first half and is
    idle; `sigterm-busy` — SIGTERM while it is printing a 60,000-record backlog; and
    `max-messages` — it exits by itself after 15,000 of a 30,000 backlog. Then the
    broker restarts (same ports and data) and a second consumer in the group prints
    the rest: it starts exactly at the committed offsets, which are one past the last
    offset the first consumer printed — no duplicates, nothing missing."""
    b = cbroker
    topic, group, parts = f"conn-restart-{stop}", f"g-restart-{stop}", 3
    ck_create_topic(b, topic, parts)
    args = consumer_args(b, group, "--topic", topic, consumer_id="first",
                         session_timeout_ms=SESSION_MS)
    produced: set[tuple[int, int]] = set()
    if stop == "sigterm-idle":
        produced |= set(produce_keyed(b, topic, 15_000))
        first = consumers.start("first", *args)
        wait_for("the first consumer to print the first half",
                 lambda: coverage([first], produced, topic), 30, check=consumers.assert_running)
        time.sleep(0.5)
    elif stop == "sigterm-busy":
        produced |= set(produce_keyed(b, topic, 60_000))
        first = consumers.start("first", *args)
        wait_for("the first consumer to print 10,000 of a 60,000 backlog",
                 lambda: True if first.out.count() >= 10_000 else f"{first.out.count()} printed",
                 60, check=consumers.assert_running, interval=0.005)
    else:
        produced |= set(produce_keyed(b, topic, 30_000))
        first = consumers.start("first", *args, "--max-messages", "15000")

    problems = []
    if stop == "max-messages":
        rc = first.wait_exit(30)
        first.signals.append((time.monotonic(), "EXITED"))  # by design, not a crash
    else:
        t_term = time.monotonic()
        try:
            rc = first.terminate(timeout=10)
        except AssertionError as e:
            rc = None
            lines = first.lines()
            after = [ln for ln in lines if ln.ts > t_term]
            problems.append(
                f"{e}: it printed {len(after)} records after the SIGTERM (the last "
                f"{(after[-1].ts - t_term) if after else 0:.2f} s after it), then nothing; "
                f"no `event lost reason=shutdown` and no LeaveGroup; stderr tail:\n{first.tail(5)}")
    assert not problems, "\n".join(problems)
    assert rc == 0, f"first consumer exited {rc}\n{first.tail()}"
    lines1 = first.lines()
    if stop == "max-messages":
        assert len(lines1) == 15_000, f"--max-messages 15000 printed {len(lines1)} records"
    last1 = last_offsets(lines1)
    committed_before = committed_offsets(b, group)
    print(f"first consumer printed {len(lines1)} records, last offsets {last1}; "
          f"committed {committed_before}")
    if stop == "sigterm-idle":
        produced |= set(produce_keyed(b, topic, 15_000, start=15_000))
    assert len(lines1) < len(produced), "the first consumer consumed everything"

    b.restart()
    committed_after = committed_offsets(b, group)
    assert committed_after == committed_before, \
        f"committed offsets changed across the restart: {committed_before} -> {committed_after}"
    for p in range(parts):
        c = committed_after.get((topic, p))
        # One past the last offset printed; a partition it printed nothing of may have
        # no commit or its log start (0).
        want = {last1[p] + 1} if p in last1 else {None, 0}
        if c not in want:
            problems.append(f"{topic}-{p}: committed {c} when the first consumer stopped, but it "
                            f"printed up to {last1.get(p)} (expected committed {' or '.join(map(str, want))})")

    second = consumers.start("second", *consumer_args(b, group, "--topic", topic,
                                                      consumer_id="second",
                                                      session_timeout_ms=SESSION_MS))
    remaining = produced - {(ln.partition, ln.offset) for ln in lines1}
    reachable = {(p, o) for p, o in remaining
                 if o >= (committed_after.get((topic, p)) or 0)}

    def done():
        missing = reachable - printed([second], topic)
        return True if not missing else f"{len(missing)} of {len(reachable)} not printed"
    try:
        wait_for("the second consumer to print the rest", done, 60,
                 check=consumers.assert_running)
    except AssertionError as e:
        problems.append(str(e))
    time.sleep(0.3)
    lines2 = second.lines()
    for p in range(parts):
        firsts = [ln.offset for ln in lines2 if ln.partition == p]
        c = committed_after.get((topic, p))
        if firsts and firsts[0] != (c if c is not None else 0):
            problems.append(f"{topic}-{p}: second consumer started at {firsts[0]}, committed "
                            f"offset was {c}")
    both = collections.Counter((ln.partition, ln.offset) for ln in lines1 + lines2)
    dups = sorted(k for k, n in both.items() if n > 1)
    if dups:
        problems.append(f"{len(dups)} records printed by both consumers, e.g. {dups[:10]}")
    missing = produced - set(both)
    if missing:
        by_p = {p: sorted(o for pp, o in missing if pp == p) for p in {p for p, _ in missing}}
        problems.append(f"{len(missing)} records printed by neither consumer: " + "; ".join(
            f"{topic}-{p}: {len(o)} records, offsets {o[0]}..{o[-1]}" for p, o in sorted(by_p.items())))
    assert not problems, "\n".join(problems)
    assert second.terminate() == 0


# ---------------------------------------------------------------------------------
# 5. Bad input: clear errors, not hangs
# ---------------------------------------------------------------------------------
def run_consume(args: list[str], timeout: float) -> tuple[int, str, float]:
    t0 = time.monotonic()
    r = subprocess.run([str(drover_bin()), "consume", "--format", "offsets", *args],
                       capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL)
    return r.returncode, r.stderr.decode(errors="replace"), time.monotonic() - t0


def test_bad_input_errors(cbroker, consumers):
    b = cbroker
    # Unreachable brokers take the 30 s bootstrap timeout: start it first, check the
    # others meanwhile.
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{s.getsockname()[1]}"
    t0 = time.monotonic()
    unreachable = subprocess.Popen(
        [str(drover_bin()), "consume", "--brokers", dead, "--group", "g",
         "--topic", "t"], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE)
    problems = []
    try:
        rc, err, took = run_consume(["--brokers", b.bootstrap, "--group", "g-bad",
                                     "--topic", "no-such-topic"], timeout=30)
        print(f"unknown topic: exit {rc} after {took:.2f} s: {err.strip()[-300:]}")
        if rc != 1 or "no-such-topic" not in err or took > 5:
            problems.append(f"unknown topic: exit {rc} after {took:.1f} s, stderr {err[-500:]!r}")

        rc, err, took = run_consume(["--brokers", b.bootstrap, "--group", "g-bad",
                                     "--whitelist", "wc-("], timeout=30)
        print(f"invalid regex: exit {rc} after {took:.2f} s: {err.strip()[-300:]}")
        if rc != 1 or "wc-(" not in err or took > 5:
            problems.append(f"invalid regex: exit {rc} after {took:.1f} s, stderr {err[-500:]!r}")

        # --reset none on a group that never committed.
        ck_create_topic(b, "conn-none", 2)
        produce_keyed(b, "conn-none", 20)
        n = consumers.start("none", *consumer_args(b, "g-never-committed", "--topic", "conn-none",
                                                   consumer_id="none",
                                                   session_timeout_ms=SESSION_MS,
                                                   extra=("--reset", "none")))
        try:
            wait_for("`error no committed offset` on stderr",
                     lambda: any(t.startswith("error no committed offset")
                                 for _, t in n.stderr_lines()) or n.tail(8), 20)
        except AssertionError as e:
            problems.append(f"--reset none: {e}")
        bad_lines = n.lines()
        if bad_lines:
            problems.append(f"--reset none printed records: {bad_lines[:5]}")
        errs = [t for _, t in n.stderr_lines() if t.startswith("error ")]
        print(f"--reset none: {errs}")
        for p in (0, 1):
            if not any(f"conn-none-{p}" in t for t in errs):
                problems.append(f"--reset none: no error line names conn-none-{p}: {errs}")

        try:
            out, err_b = unreachable.communicate(timeout=40)
        except subprocess.TimeoutExpired:
            unreachable.kill()
            out, err_b = unreachable.communicate()
            problems.append(f"unreachable brokers: still running {time.monotonic() - t0:.0f} s "
                            f"after start; stderr {err_b.decode(errors='replace')[-500:]!r}")
        else:
            took = time.monotonic() - t0
            err = err_b.decode(errors="replace")
            print(f"unreachable brokers: exit {unreachable.returncode} after {took:.2f} s: "
                  f"{err.strip()[-300:]}")
            if unreachable.returncode != 1 or dead not in err or took > 35:
                problems.append(f"unreachable brokers: exit {unreachable.returncode} after "
                                f"{took:.1f} s, stderr {err[-500:]!r}")
    finally:
        if unreachable.poll() is None:
            unreachable.kill()
            unreachable.wait()
    assert not problems, "\n".join(problems)
