"""Rebalances as fast as the coordinator can make them, with unchanged clients (issue 19):

- KIP-848: a member that reconciles (partitions to revoke or to receive) is answered
  with `consumer_reconcile_heartbeat_interval_ms` (200 ms) instead of
  `consumer_heartbeat_interval_ms`, and librdkafka (confluent-kafka,
  `group.protocol=consumer`) follows the interval of each answer: with a normal
  interval of 30 s, a second member receives its partitions after the first revoked
  them within the test's wait, which it could not at 30 s; once reconciled, the members
  go back to the normal interval (no heartbeat in the next seconds); members of a
  staggered rollout keep the short interval while the group settles
  (`consumer_rebalance_settle_ms`), so early members learn of later targets at once;
  while the coordinator's KIP-848 members are few, reconciled members are told a
  steady interval far below the normal one (`consumer_heartbeat_budget_per_s`), so
  the survivors of a leave take its partitions over within seconds.
- Classic: the initial rebalance delay ends when no JoinGroup came for
  `initial_rebalance_quiet_ms` (300 ms): with `initial_rebalance_delay_ms` = 60 s,
  confluent-kafka and kafka-python members get their assignment long before the delay
  would have ended.

The facts asserted are what the clients were told (their rebalance callbacks) and the
broker's request counters, never durations; each wait bound is far below the timer the
change removes (30 s, 60 s), so the tests fail without it."""

from __future__ import annotations

import time

from drover_testlib import ck_create_topic, http_get
from kafka_groups_testlib import consumers, start_group_broker, wait_for  # noqa: F401

NORMAL_INTERVAL_MS = 30_000


def heartbeats_answered(broker) -> int:
    """ConsumerGroupHeartbeat requests the broker answered so far (every error label)."""
    _, _, body = http_get(broker.admin_url + "/metrics")
    total = 0
    for line in body.splitlines():
        if line.startswith('drover_requests_total{api="ConsumerGroupHeartbeat"'):
            total += int(float(line.rsplit(" ", 1)[1]))
    return total


def test_kip848_members_heartbeat_at_the_short_interval_while_they_reconcile(
        broker_factory, consumers):  # noqa: F811
    b = start_group_broker(broker_factory,
                           consumer_heartbeat_interval_ms=NORMAL_INTERVAL_MS,
                           consumer_session_timeout_ms=3 * NORMAL_INTERVAL_MS,
                           # The normal interval only (the budget has its own test).
                           consumer_heartbeat_budget_per_s=0)
    topic, group = "speed-kip848", "g-speed-kip848"
    ck_create_topic(b, topic, 4)
    # c1's first assignment callback takes 6 s: it keeps heartbeating meanwhile, at
    # the interval of its join answer (given all 4 partitions: the short one).
    c1 = consumers.start("confluent", b, topic, group, "c1", protocol="consumer",
                         assign_delay_ms=6000)
    wait_for(lambda: c1.assignments() == [[0, 1, 2, 3]], 60, "c1 to be given everything")
    # c2 joins while c1 is in its callback: c2 waits for partitions c1 holds (short
    # interval), c1 learns at its next (short) heartbeat that it must revoke two.
    c2 = consumers.start("confluent", b, topic, group, "c2", protocol="consumer")

    def balanced():
        a, b2 = c1.current() or set(), c2.current() or set()
        return len(a) == 2 and len(b2) == 2 and a | b2 == {0, 1, 2, 3}
    # Without the short interval c2 would be told 30 s at its join and get its
    # partitions only at its second heartbeat, 30 s later.
    wait_for(balanced, 25, "c2 to receive the partitions c1 revoked")
    # Reconciled: both are back at the 30 s interval. Allow the acknowledgements that
    # may still be under way (one per member).
    wait_for(lambda: len(c2.assignments()) >= 1, 5, "c2's callback")
    before = heartbeats_answered(b)
    time.sleep(3)
    after = heartbeats_answered(b)
    assert after - before <= 2, f"{after - before} heartbeats in 3 s after reconciling"
    assert c1.current() | c2.current() == {0, 1, 2, 3}
    assert not c1.current() & c2.current()


def test_kip848_members_of_a_staggered_rollout_balance_within_the_settle_time(
        broker_factory, consumers):  # noqa: F811
    """Four confluent-kafka KIP-848 members started 300 ms apart (a rollout): the
    first ones reconcile before the later ones join, and are still told the short
    interval while the group settles (`consumer_rebalance_settle_ms`), so they learn
    of each later target within a fraction of a second. With the normal interval of
    30 s an early member would hold the later ones' partitions until its next
    heartbeat, 30 s later (with `consumer_rebalance_settle_ms = 0` this test times
    out)."""
    b = start_group_broker(broker_factory,
                           consumer_heartbeat_interval_ms=NORMAL_INTERVAL_MS,
                           consumer_session_timeout_ms=3 * NORMAL_INTERVAL_MS,
                           # The normal interval only (the budget has its own test).
                           consumer_heartbeat_budget_per_s=0,
                           # Longer than the default 1 s: on a loaded machine the
                           # members start up to a second or more apart, and a member
                           # told the normal interval before the next one joins would
                           # wait 30 s (the window, not its length, is under test).
                           consumer_rebalance_settle_ms=5000)
    topic, group = "speed-rollout", "g-speed-rollout"
    ck_create_topic(b, topic, 8)
    members = []
    for i in range(4):
        members.append(consumers.start("confluent", b, topic, group, f"r{i}",
                                       protocol="consumer"))
        if i == 0:
            wait_for(lambda: members[0].current() == set(range(8)), 60,
                     "the first member to own everything")
        time.sleep(0.3)

    def balanced():
        held = [m.current() or set() for m in members]
        return (all(len(h) == 2 for h in held) and set().union(*held) == set(range(8)))
    wait_for(balanced, 20, "every member to hold two partitions")


def test_kip848_survivors_of_a_leave_take_its_partitions_within_the_budgeted_interval(
        broker_factory, consumers):  # noqa: F811
    """Three confluent-kafka KIP-848 members, a normal interval of 60 s and the default
    heartbeat budget (1,000 a second: a 1 s steady interval for so few members). One
    leaves; the two survivors take its partitions at their next heartbeat, within
    the test's 10 s wait. Told the normal interval (budget 0), a survivor would learn
    of the leave only at its next heartbeat, up to 60 s later."""
    b = start_group_broker(broker_factory,
                           consumer_heartbeat_interval_ms=60_000,
                           consumer_session_timeout_ms=180_000)
    topic, group = "speed-leave", "g-speed-leave"
    ck_create_topic(b, topic, 6)
    members = [consumers.start("confluent", b, topic, group, f"l{i}", protocol="consumer")
               for i in range(3)]

    def shares(ms, each):
        held = [m.current() or set() for m in ms]
        return all(len(h) == each for h in held) and set().union(*held) == set(range(6))
    wait_for(lambda: shares(members, 2), 30, "every member to hold two partitions")
    # Reconciled members heartbeat at the steady interval (about once a second each),
    # not the normal 60 s.
    before = heartbeats_answered(b)
    time.sleep(3)
    assert heartbeats_answered(b) - before >= 3, "reconciled members told the normal interval"
    members[2].stop()
    wait_for(lambda: shares(members[:2], 3), 10, "the survivors to take the leaver's partitions")
    assert not members[0].current() & members[1].current()


def test_classic_initial_delay_ends_when_joiners_stop_coming(broker_factory,
                                                             consumers):  # noqa: F811
    b = start_group_broker(broker_factory, initial_rebalance_delay_ms=60_000)
    topic, group = "speed-classic", "g-speed-classic"
    ck_create_topic(b, topic, 6)
    members = [consumers.start("confluent", b, topic, group, "ck1", assignor="range"),
               consumers.start("confluent", b, topic, group, "ck2", assignor="range"),
               consumers.start("kafka-python", b, topic, group, "kp", assignor="range")]

    def all_owned():
        held = [m.current() or set() for m in members]
        owned = set().union(*held)
        return owned == set(range(6)) and sum(len(h) for h in held) == 6 and all(held)
    # The 60 s delay would hold the first generation until then: the quiet time ends
    # it once the JoinGroups stop.
    wait_for(all_owned, 40, "every member to hold partitions, before the 60 s delay")
